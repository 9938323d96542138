// chess's parameters, declared once: the ParamSpec rows (name, paper default, range, doc with the seed
// section) and the typed struct the cost model (cost.cpp), the trace selector (selector.cpp) and the
// budget mapping read them through (model/param_table.hpp). The row order is the order of ParamValues.
#pragma once
#include "model/param_table.hpp"

namespace kvsim::policies::chess {

struct Params {
  double page_size, chunk_pages, grid_chunks, rho_grid, rho_chunk, rho_page, sink_pages, window_pages, reselect_pages;
};

inline const ParamTable<Params>& param_table() {
  static const ParamTable<Params> table{"chess", {
      {&Params::page_size, {"page_size", 32, Range::between(1, 65536), true, "tokens per page (§5.1: 'Page size 32 across all experiments')"}},
      {&Params::chunk_pages, {"chunk_pages", 8, Range::between(1, 1e6), true, "pages per chunk, N_c (§3.1; value not given in the paper: estimate)"}},
      {&Params::grid_chunks, {"grid_chunks", 8, Range::between(1, 1e6), true, "chunks per grid, N_g (§3.1; value not given in the paper: estimate)"}},
      {&Params::rho_grid, {"rho_grid", 0.5, Range{0, 1, true}, false, "fraction of grids kept (Table 1 'Aggressive' (0.5, 0.2, 0.1) = 1% budget)"}},
      {&Params::rho_chunk, {"rho_chunk", 0.2, Range{0, 1, true}, false, "fraction of chunks kept inside kept grids (Table 1 Aggressive)"}},
      {&Params::rho_page, {"rho_page", 0.1, Range{0, 1, true}, false, "fraction of pages kept inside kept chunks (Table 1 Aggressive)"}},
      {&Params::sink_pages, {"sink_pages", 1, Range::between(0, 1e6), true, "first pages always kept as attention sinks (§3.2; count not given: estimate)"}},
      {&Params::window_pages, {"window_pages", 4, Range::between(1, 1e6), true, "recent pages always kept and averaged into the anchor, W (§3.2 eq. 3; count not given: estimate)"}},
      {&Params::reselect_pages, {"reselect_pages", 10, Range::between(1e-3, 1e6), false, "generated pages between reconstructions (App. C: dynamic trigger averages ~10 pages)"}},
  },
      // budget knobs (model/budget_knob.hpp): the grids the target search and capacity planning walk
      {{&Params::rho_chunk, KnobGrid::ratios()}, {&Params::rho_page, KnobGrid::ratios()}}};
  return table;
}

}  // namespace kvsim::policies::chess
