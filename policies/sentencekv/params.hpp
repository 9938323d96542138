// sentencekv's parameters, declared once: the ParamSpec rows (name, paper default, range, doc with the seed
// section) and the typed struct the cost model (cost.cpp), the trace selector (selector.cpp) and the
// budget mapping read them through (model/param_table.hpp). The row order is the order of ParamValues.
#pragma once
#include "model/param_table.hpp"

namespace kvsim::policies::sentencekv {

struct Params {
  double token_budget, keep_factor, obs_window, sinks, recent, mean_sentence_tokens, reselect, kept_kv_on,
      kept_sentences;
};

inline const ParamTable<Params>& param_table() {
  static const ParamTable<Params> table{"sentencekv", {
      {&Params::token_budget, {"token_budget", 1024, Range::between(1, 1e8), true, "tau: prompt tokens attended per step, sinks and recent included (§4.1 'the maximum number of tokens we can keep in GPU memory during decoding'; Tables 4-5: tau = 1024)"}},
      {&Params::keep_factor, {"keep_factor", 2, Range::between(1, 1e4), false, "r: floor(r tau) prompt tokens kept at prefill, sinks and recent included (§4.1 'typically r = 2 or 3'; §A.6 uses 2)"}},
      {&Params::obs_window, {"obs_window", 32, Range::between(1, 1e6), true, "N: prompt queries that score tokens (§4.1 'typically N = 32')"}},
      {&Params::sinks, {"sinks", 32, Range::between(0, 1e6), true, "initial tokens always on the GPU, counted in tau and floor(r tau) (public code default 32; not in the paper)"}},
      {&Params::recent, {"recent", 32, Range::between(0, 1e6), true, "recent prompt tokens always on the GPU, counted in tau and floor(r tau) (public code default 32; not in the paper)"}},
      {&Params::mean_sentence_tokens, {"mean_sentence_tokens", 28, Range::between(1, 1e6), false, "mean prompt sentence length in tokens (§A.4: ~25-30 on the paper's corpora); a trace supplies the measured value"}},
      {&Params::reselect, {"reselect", 0, Range::between(0, 1), true, "when sentences are rescored and reloaded: per_step (Algorithm 1) or per_sentence (§4.2 prose)", {"per_step", "per_sentence"}}},
      {&Params::kept_kv_on, {"kept_kv_on", 0, Range::between(0, 1), true, "where the kept KV lives: cpu (the paper, §4.1 'offload them to CPU memory': selected sentences copied CPU->GPU per selection) or gpu (the public code: kept KV in HBM, dense attention over it with a mask)", {"cpu", "gpu"}}},
      {&Params::kept_sentences, {"kept_sentences", 0, Range::between(0, 1e8), false, "sentences holding at least one retrievable kept token (each has a mean key per layer and KV head, eq. 1); 0 = the analytical estimate (kept tokens spread uniformly, §A.7); a trace supplies the measured count"}},
  },
      // budget knobs (model/budget_knob.hpp): the grids the target search and capacity planning walk
      {{&Params::token_budget, KnobGrid::tokens()}}};
  return table;
}

}  // namespace kvsim::policies::sentencekv
