// chess (seed 000, CHESS: Context-aware Hierarchical Efficient Semantic Selection).
// State (§3.1, eq. 1-2): per page of page_size tokens, a page vector = the mean key of the page in
// every layer and KV head, flattened (D = L * Hkv * d); chunk vectors = means of chunk_pages pages;
// grid vectors = means of grid_chunks chunks. KV stays in HBM, paged (§4.1, zero copy).
// Selection (§3.2, Algorithm 1): anchor = mean of the last window_pages page vectors (eq. 3); ONE
// GEMV of the anchor against all grid, chunk and page vectors; quantile thresholds keep the top
// rho_grid of grids, rho_chunk of chunks inside kept grids, rho_page of pages inside kept chunks;
// the working set is those pages + sink_pages + the last window_pages pages, written as a page-index
// list for FlashInfer's paged attention (§4.3). Selection re-runs only when entropy/varentropy
// cross calibrated thresholds (§3.3); Appendix C reports an average of ~10 generated pages between
// reconstructions: reselect_pages. Its cost is amortized over those steps; the uncertainty check
// itself runs every step.
#include "policies/blocks.hpp"
#include "model/policy.hpp"
#include "policies/chess/params.hpp"
#include "policies/chess/policy.hpp"

namespace kvsim::policies::chess {

namespace {

class ChessPolicy final : public Policy {
 public:
  std::string_view name() const override { return "chess"; }
  std::string_view summary() const override {
    return "grid -> chunk -> page selection by one GEMV over mean-key vectors; zero-copy paged attention (seed 000)";
  }
  const std::vector<ParamSpec>& params() const override { return param_table().specs(); }
  const std::vector<BudgetKnob>& budget_knobs() const override { return param_table().knobs(); }
  // Tokens in the working set of a cache of n tokens.
  static double selected_tokens(const Params& p, double n) {
    const double page = p.page_size;
    const double keep = p.rho_grid * p.rho_chunk * p.rho_page * n;
    return std::min(n, std::ceil(keep / page) * page + (p.sink_pages + p.window_pages) * page);
  }
  // Page + chunk + grid vectors for n tokens.
  static double vectors(const Params& p, double n) {
    const double pages = std::ceil(n / p.page_size);
    const double chunks = std::ceil(pages / p.chunk_pages);
    return pages + chunks + std::ceil(chunks / p.grid_chunks);
  }
  MemoryDemand memory(const Deployment& d, const ParamValues& values, double prompt, double output) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    MemoryDemand m;
    m.kv_hbm_per_seq = (prompt + output) * d.kv_bytes_per_token();
    const double D = s.L * s.hkv * s.hd;
    // Hierarchy vectors at KV precision, page-index list (int32) for the working set.
    m.hbm_per_seq = m.kv_hbm_per_seq + vectors(p, prompt + output) * D * s.bkv +
                    std::ceil(selected_tokens(p, prompt + output) / p.page_size) * 4;
    return m;
  }
  void prefill(const Deployment& d, const ParamValues& values, double prompt, PhaseList& out) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    const double D = s.L * s.hkv * s.hd;
    Phase b{"hierarchy_build", PhaseKind::build, Device::gpu, ComputeUnit::simt, {}};
    b.work.flops = s.L * s.hkv * prompt * s.hd + vectors(p, prompt) * D;
    b.work.hbm_bytes = s.L * s.hkv * prompt * s.key_row + 2 * vectors(p, prompt) * D * s.bkv;
    b.work.launches = s.L + 2;
    out.push_back(b);
  }
  void decode_attention(const Deployment& d, const ParamValues& values, const StepShape& st, PhaseList& out) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    const double n = st.context(), B = st.batch;
    const double D = s.L * s.hkv * s.hd;
    const double V = vectors(p, n);
    const double every = 1.0 / (p.reselect_pages * p.page_size);  // fraction of steps that reselect
    // Once per step, before layer 0 (the anchor uses keys of all layers from earlier steps).
    // Uncertainty monitor: entropy and varentropy of the output distribution, every step.
    Phase u{"uncertainty", PhaseKind::elementwise, Device::gpu, ComputeUnit::simt, {}};
    u.work.flops = B * d.vocab * 6;
    u.work.hbm_bytes = B * d.vocab * 4;
    u.work.launches = 1;
    out.push_back(u);
    // Selection, amortized: anchor (mean of W page vectors), one GEMV over all V vectors of D, three
    // quantile thresholds with hierarchical masks, and the page-index list rewrite.
    Phase sel{"select_gemv", PhaseKind::score, Device::gpu, ComputeUnit::simt, {}};
    sel.work.flops = every * B * (V * D * 2 + p.window_pages * D);
    sel.work.hbm_bytes = every * B * (V + p.window_pages) * D * s.bkv;
    sel.work.launches = every * 2;
    out.push_back(sel);
    Phase mask{"hier_mask", PhaseKind::select, Device::gpu, ComputeUnit::simt, {}};
    mask.work.flops = every * B * V * 8;
    // Each vector's score read once (the levels select inside one block, in shared memory) and the kept
    // pages' ids written (docs/validation/phase-bytes.md, rule 2).
    mask.work.hbm_bytes = every * B * (V * 4 + std::ceil(selected_tokens(p, n) / p.page_size) * 4);
    // Three quantile thresholds (grid, chunk, page level), each one top-k call over a sequence's
    // vectors of that level (about V / 3 each), and their masks fused into the selection's writes.
    mask.work.launches = every * 3;
    mask.rows = float(B);
    mask.row_elements = float(std::max(1.0, V / 3));
    out.push_back(mask);
    // A page filled every page_size steps: its mean key (all layers, KV heads), folded into its
    // chunk's and grid's vectors.
    Phase pv{"page_vector", PhaseKind::build, Device::gpu, ComputeUnit::simt, {}};
    pv.work.flops = B * D * 3;  // page_size D adds once per page_size steps, plus the chunk and grid updates
    pv.work.hbm_bytes = B * (p.page_size * D * s.bkv + 3 * D * s.bkv) / p.page_size;
    pv.work.launches = 1;
    out.push_back(pv);
    // Per layer: paged attention over the working set (runs of one page per KV head).
    out.push_back(blocks::attention(d, "paged_attention", B, selected_tokens(p, n), p.page_size * s.key_row, true));
  }
};
}  // namespace

const Policy& cost_model() {
  static const ChessPolicy p;
  return p;
}

}  // namespace kvsim::policies::chess
