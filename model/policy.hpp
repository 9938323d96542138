// One interface for every KV-cache policy (full, streaming, snapkv, quest, chess, sentencekv, chunkkv,
// sekv, ctkvr). A policy is registered by name and chosen in YAML; it declares its parameters (paper
// defaults, ranges, documentation) and answers three questions for a design point:
//   memory()  — what it keeps per tier, per sequence and fixed (at peak: prompt + generated tokens);
//   prefill() — the phases it adds to prefill (building summaries, indexes, offloading), i.e. to TTFT;
//   decode_attention() — the phases that replace dense attention in one decode step.
// The dense transformer around attention (GEMMs, norms, LM head) is shared and added by the planner.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "model/budget_knob.hpp"
#include "model/deployment.hpp"
#include "model/transformer.hpp"

namespace kvsim {

// How a statistic measured on a trace carries over to this parameter at the scenario's context (replay,
// apply_statistics): as it was measured (a rate, a ratio, a shape of the text such as a mean sentence
// length), or scaled by the scenario's context over the trace's (a count of tokens that grows with the
// context). Declared per parameter, in the policy's parameter table.
enum class CarryRule { as_is, scale_context };

struct ParamSpec {
  std::string name;
  double default_value;
  Range range;
  bool integer;
  std::string doc;  // meaning, unit and the seed section the default comes from
  // A parameter with choices is written as one of these words; its value is the word's index.
  std::vector<std::string> choices = {};
  CarryRule carry = CarryRule::as_is;  // set from the table row (model/param_table.hpp)
};

// The shape of one decode step: `batch` sequences whose prompts had `prompt` tokens and which have
// generated `generated` tokens so far (so their caches hold prompt + generated tokens in total).
struct StepShape {
  double batch = 1, prompt = 0, generated = 0;
  double context() const { return prompt + generated; }
};

// Bytes a policy needs, per GPU. Per-sequence amounts scale with the batch.
struct MemoryDemand {
  double hbm_per_seq = 0, hbm_fixed = 0;
  double dram_per_seq = 0, dram_fixed = 0;
  double kv_hbm_per_seq = 0, kv_dram_per_seq = 0;  // the KV part of the above, reported separately
  // The part of hbm_per_seq that is the policy's index or summaries (e.g. CTKVR's qcIVF and centroid
  // queries), over all layers; the plan reports it in total and per layer (MemoryReport).
  double index_hbm_per_seq = 0;
};

// Parameter values in the order of Policy::params() (policies/<name>/params.hpp declares that order
// once, with the typed struct every file reads them through: model/param_table.hpp).
using ParamValues = std::vector<double>;

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view summary() const = 0;
  virtual const std::vector<ParamSpec>& params() const = 0;
  // The budget knobs the target search and capacity planning walk (model/budget_knob.hpp), declared in
  // the policy's parameter table; empty for a policy without a budget (full attention). Pure virtual so
  // that a new policy says which knobs it has rather than silently having none.
  virtual const std::vector<BudgetKnob>& budget_knobs() const = 0;

  virtual MemoryDemand memory(const Deployment& d, const ParamValues& p, double prompt,
                              double output) const = 0;
  virtual void prefill(const Deployment& d, const ParamValues& p, double prompt, PhaseList& out) const = 0;
  // The phases that replace dense attention in one decode step: per-layer phases (repeat = L) with
  // their streams and dependencies, and once-per-step phases (repeat = 1). See model/decode_graph.hpp.
  virtual void decode_attention(const Deployment& d, const ParamValues& p, const StepShape& s,
                                PhaseList& out) const = 0;
  // What a reader of this design point's result should know that the numbers do not say (e.g. a
  // budget that leaves no room for the policy's mechanism): one sentence per note, appended to `out`;
  // the planner puts them in PlanResult::notes. Default: none.
  virtual void notes(const Deployment& d, const ParamValues& p, double prompt, double output,
                     std::vector<std::string>& out) const {
    (void)d, (void)p, (void)prompt, (void)output, (void)out;
  }

  ParamValues defaults() const;
  // Index of a parameter by name, or -1.
  int param_index(std::string_view param) const;
};

// Reads one parameter from a scenario mapping (a number, an integer, or one of its choices).
double read_param(YamlMap& m, const ParamSpec& spec);
// The text of a parameter's value: the number, or the chosen word.
std::string param_text(const ParamSpec& spec, double value);

// The policies a scenario may name, in the order the CLI shows them. model/ knows only the Policy
// interface: the table of built-in policies belongs to the layer above (policies/registry.hpp,
// policy_catalog()), which hands it to the loaders that resolve names (load_scenario, ...).
struct PolicyCatalog {
  std::vector<const Policy*> policies;
  const Policy* find(std::string_view name) const;  // nullptr when unknown
  std::vector<std::string> names() const;
};

}  // namespace kvsim
