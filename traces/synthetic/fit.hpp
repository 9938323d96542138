// Fitting the synthetic generator to a real trace (`kvsim trace fit`, docs/synthetic-traces.md, "Fitting
// to a real trace"): per (layer, KV head) statistics of the real trace, a retrieval/local classification
// of its heads, contiguous layer groups, and per group the generator knobs whose simulated statistics
// come closest to the real ones (simulated moments, a deterministic coordinate search). Several lengths
// of one text add a scaling rule per knob.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "traces/format/trace.hpp"
#include "traces/synthetic/synthetic.hpp"

namespace kvsim {

struct FitOptions {
  int groups = 3;        // contiguous layer groups (at most the stored layers)
  uint64_t seed = 1;     // seed of every simulated trace, and of the fitted config
  int max_evaluations = 200;  // simulations per descent; a group screens 33 points, then runs two descents
  // The needle of the longest source as its tokens [first, second) of the prompt; {0, 0}: no needle.
  // With one, the fitted config gets a needle at that depth and length, and needle_query_strength is
  // fitted to the real needle's attention share (fit_needle).
  std::pair<int64_t, int64_t> needle{0, 0};
};

// One statistic: the real trace's, the fitted generator's, and the relative error.
struct FitStat {
  std::string name;
  double real = 0, fitted = 0;
  double relative_error() const;  // (fitted - real) / |real|; 0 when both are 0
};

struct GroupFit {
  int first = 0, last = 0;  // model layers, inclusive
  int heads = 0;            // (layer, KV head) pairs of the real trace in the group
  int retrieval = 0;        // how many of them the classification rule calls retrieval heads
  std::vector<std::pair<std::string, double>> knobs;  // group_knobs() names, fitted values
  std::vector<FitStat> residuals;  // the group's mean statistics: real against its best simulation
  int evaluations = 0;             // simulated profiles the search used
};

struct TraceFitResult {
  std::string source;  // file name as given
  int64_t tokens = 0, prompt_tokens = 0, generated_tokens = 0, decode_queries = 0;
  SyntheticConfig config;  // the fitted generator at the real trace's shape and length
  std::vector<GroupFit> groups;
  std::vector<FitStat> residuals;  // whole trace: real against `config` generated and profiled alike
};

// The statistics a fit matches, in order (names used in tables, JSON and YAML).
const std::vector<std::string>& fit_statistic_names();

// The minimum a trace must have to be fitted, stated in error messages.
constexpr int64_t kFitMinTokens = 256;
constexpr int64_t kFitMinDecodeQueries = 33;  // query pairs 32 positions apart must exist

// Fits one trace. `groups` fixes the layer groups ([first, last] model layers); empty = choose them
// (options.groups contiguous groups, by least within-group spread of the per-layer statistics).
// `start`, a fit of the same groups at another length, starts each group's search at its knobs
// (without screening) and keeps its retrieval shares.
// Throws InputError naming `name` when the trace cannot be fitted (too short, no decode queries,
// non-finite data, a shape the generator cannot make).
TraceFitResult fit_trace(const TraceSource& real, const std::string& name, const FitOptions& options,
                         const std::vector<std::pair<int, int>>& groups = {}, const TraceFitResult* start = nullptr);

// Fits several lengths of one text with the same layer groups (chosen on the longest) and returns the
// fits, shortest first; the longest fit's config carries a scaling rule per group knob. The longest
// length is fitted in full; the shorter ones fit only the slopes of the logit strengths in ln(tokens)
// (every other knob is the longest fit's at every length), and their results are that rule's configs.
std::vector<TraceFitResult> fit_traces(const std::vector<const TraceSource*>& real, const std::vector<std::string>& names,
                                       const FitOptions& options);

// The needle statistic: the mean attention share of the decode queries (every stored layer and query
// head, as the profile samples them) on `span`.
double needle_share(const TraceSource& trace, std::pair<int64_t, int64_t> span);

// Gives `fit.config` a needle at the real one's depth (span.first / P) and length, and the
// needle_query_strength (0 .. 50, bisection: the share grows with it) whose generated needle share equals
// the real trace's; appends the "needle_share" residual. Throws InputError naming `name` for a span
// outside the prompt.
void fit_needle(TraceFitResult& fit, const TraceSource& real, const std::string& name, std::pair<int64_t, int64_t> span);

// The fitted config as a YAML file `kvsim trace gen --config` loads, with a `fit:` provenance block
// (sources, seed, residuals). Deterministic: the same fits give the same bytes.
std::string fit_yaml(const std::vector<TraceFitResult>& fits, const FitOptions& options);

// Residuals per source and group as a table (what `kvsim trace fit` prints).
std::string fit_table(const std::vector<TraceFitResult>& fits);
std::string fit_json(const std::vector<TraceFitResult>& fits, const FitOptions& options);

}  // namespace kvsim
