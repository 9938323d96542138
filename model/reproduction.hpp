// Reproducing a paper's system results: a scenario (scenarios/papers/<paper>/*.yaml) whose
// `reproduce:` block lists the figures the paper published for that configuration (a table or figure
// id, the metric, the policy, the context and the printed value). Each figure is predicted by the
// planner on the scenario's hardware, model and implementation profile and put next to the published
// value with the relative error. Nothing here is fitted: the scenario holds the paper's configuration,
// and the prediction is whatever the model says. Format: docs/scenarios.md; results:
// docs/reproductions.md.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/scenario.hpp"

namespace kvsim {

// What a published figure measures (and so what the planner predicts for it).
enum class ReproMetric {
  tpot,          // time per output token (PlanResult::tpot_s; with phases: the step without their work)
  ttft,          // time to first token
  latency,       // end-to-end generation time: TTFT + (output - 1) TPOT
  hbm_peak,      // HBM in use at peak (weights, workspace, policy state, KV) at the batch
  kv_prompt,     // HBM KV of one sequence after prefill (the prompt only, no generated tokens)
  kv_per_token,  // KV bytes of one token, all layers
  phase,         // seconds of the named phase(s) in one prefill or one decode step, solo roofline
  throughput,    // decode tokens per second per GPU at the figure's batch (PlanResult::throughput_tok_s)
};

struct PublishedFigure {
  std::string source;        // the paper's table or figure, e.g. "Table 4"
  std::string policy;        // a policy of the scenario
  std::string label;         // the paper's name for the row (e.g. ChunkKV_reuse); default: the policy
  ParamValues params;        // its parameters (the scenario's, with the figure's `set:` on top)
  const Policy* pol = nullptr;
  ReproMetric metric = ReproMetric::tpot;
  int64_t context = 0, output = 0, batch = 1;
  std::vector<std::string> phases;  // metric phase: names summed; metric tpot: phases excluded
  std::string stage;                // metric phase: "prefill" or "decode"
  bool oom = false;                 // the paper printed OOM instead of a number
  double value = 0;                 // in `unit`
  std::string unit;                 // ms, s, B, KiB, MiB, GiB, KB, MB, GB, tok/s
  int decimals = 0;                 // digits the paper printed after the point (negative: a printed exponent, 1.5e3 -> -2)
  bool exact = false;               // memory/index figures the configuration determines: must match to the printed digits
  // The paper's own words for the value(s) (`printed:`), e.g. "around 5 GB"; required for an exact
  // figure. A figure the paper words as around/about/approximately/nearly/roughly/~ is `approximate`:
  // never exact, and summarized on its own (its error is the paper's rounding, not the model's).
  std::string printed;
  bool approximate = false;
  std::string note;                 // why a figure is read the way it is (shown in the report)
  // false: the published number does not measure the configuration it is predicted for here (the
  // paper says so, or it is another paper's number for another setup); still predicted and shown,
  // left out of the summary's median of the comparable figures. `note` says why.
  bool comparable = true;
  int line = 0;                     // line of the figure in the file
};

struct Reproduction {
  std::string file, paper, title;
  Scenario scenario;
  std::vector<PublishedFigure> figures;
};

// Loads a paper scenario; errors name the file, line and field of the `reproduce:` block.
Reproduction load_reproduction_file(const std::string& path, const PolicyCatalog& catalog);
Reproduction load_reproduction(const YAML::Node& doc, const std::string& file, const PolicyCatalog& catalog);

struct ReproRow {
  const PublishedFigure* figure = nullptr;
  bool predicted_oom = false;
  double predicted = 0;        // in the figure's unit
  // The 80% range of a time or throughput figure (model/uncertainty.hpp), in the figure's unit;
  // has_range false for memory figures (the memory model has no timing in it) and OOM rows.
  bool has_range = false;
  double predicted_low = 0, predicted_high = 0;
  double relative_error = 0;   // (predicted - published) / published; 0 for OOM rows
  bool matches_exactly = false;  // within half a unit of the paper's last printed digit (or both OOM)
  std::string oom_reason;
};

// Predicts every figure of a reproduction.
std::vector<ReproRow> reproduce(const Reproduction& r);

// Whether the paper's words for a figure make it approximate ("around 5 GB", "~1K", "nearly 1 GB").
bool is_approximate_wording(const std::string& printed);

// The order of two figures of one table column (same file, source, metric, unit, context, output,
// batch and stage; metric phase: the same phases), under different labels, both numbers and
// comparable. `lower` is the one published lower. Two values equal to the coarser of their last
// printed digits (within half a unit) are a published tie: not an ordering, so never a reproduced
// one. Predictions closer than that half unit predict no order either.
struct Ordering {
  const ReproRow* lower = nullptr;
  const ReproRow* higher = nullptr;
  bool published_tie = false;
  bool predicted_tie = false;
  bool reproduced = false;  // an ordering (no published tie), predicted strictly in the published order
};
std::vector<Ordering> orderings(const std::vector<ReproRow>& rows);

// The paper scenarios in the library: scenarios/papers/<paper>/*.yaml, sorted; `paper` = "" for all.
std::vector<std::string> paper_scenarios(const std::string& paper);
std::vector<std::string> paper_names();

const char* to_string(ReproMetric m);

}  // namespace kvsim
