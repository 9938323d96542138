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
#include "model/policies/blocks.hpp"
#include "model/policy.hpp"

namespace kvsim {

namespace {
enum P { kPage, kChunkPages, kGridChunks, kRhoGrid, kRhoChunk, kRhoPage, kSinkPages, kWindowPages, kReselect };

class ChessPolicy final : public Policy {
 public:
  std::string_view name() const override { return "chess"; }
  std::string_view summary() const override {
    return "grid -> chunk -> page selection by one GEMV over mean-key vectors; zero-copy paged attention (seed 000)";
  }
  const std::vector<ParamSpec>& params() const override {
    static const std::vector<ParamSpec> p = {
        {"page_size", 32, Range::between(1, 65536), true, "tokens per page (§5.1: 'Page size 32 across all experiments')"},
        {"chunk_pages", 8, Range::between(1, 1e6), true, "pages per chunk, N_c (§3.1; value not given in the paper: estimate)"},
        {"grid_chunks", 8, Range::between(1, 1e6), true, "chunks per grid, N_g (§3.1; value not given in the paper: estimate)"},
        {"rho_grid", 0.5, Range{0, 1, true}, false, "fraction of grids kept (Table 1 'Aggressive' (0.5, 0.2, 0.1) = 1% budget)"},
        {"rho_chunk", 0.2, Range{0, 1, true}, false, "fraction of chunks kept inside kept grids (Table 1 Aggressive)"},
        {"rho_page", 0.1, Range{0, 1, true}, false, "fraction of pages kept inside kept chunks (Table 1 Aggressive)"},
        {"sink_pages", 1, Range::between(0, 1e6), true, "first pages always kept as attention sinks (§3.2; count not given: estimate)"},
        {"window_pages", 4, Range::between(1, 1e6), true,
         "recent pages always kept and averaged into the anchor, W (§3.2 eq. 3; count not given: estimate)"},
        {"reselect_pages", 10, Range::between(1e-3, 1e6), false,
         "generated pages between reconstructions (App. C: dynamic trigger averages ~10 pages)"},
    };
    return p;
  }
  // Tokens in the working set of a cache of n tokens.
  static double selected_tokens(const ParamValues& p, double n) {
    const double page = p[kPage];
    const double keep = p[kRhoGrid] * p[kRhoChunk] * p[kRhoPage] * n;
    return std::min(n, std::ceil(keep / page) * page + (p[kSinkPages] + p[kWindowPages]) * page);
  }
  // Page + chunk + grid vectors for n tokens.
  static double vectors(const ParamValues& p, double n) {
    const double pages = std::ceil(n / p[kPage]);
    const double chunks = std::ceil(pages / p[kChunkPages]);
    return pages + chunks + std::ceil(chunks / p[kGridChunks]);
  }
  MemoryDemand memory(const Deployment& d, const ParamValues& p, double prompt, double output) const override {
    const auto s = blocks::shape(d);
    MemoryDemand m;
    m.kv_hbm_per_seq = (prompt + output) * d.kv_bytes_per_token();
    const double D = s.L * s.hkv * s.hd;
    // Hierarchy vectors at KV precision, page-index list (int32) for the working set.
    m.hbm_per_seq = m.kv_hbm_per_seq + vectors(p, prompt + output) * D * s.bkv +
                    std::ceil(selected_tokens(p, prompt + output) / p[kPage]) * 4;
    return m;
  }
  void prefill(const Deployment& d, const ParamValues& p, double prompt, PhaseList& out) const override {
    const auto s = blocks::shape(d);
    const double D = s.L * s.hkv * s.hd;
    Phase b{"hierarchy_build", PhaseKind::build, Device::gpu, ComputeUnit::simt, {}};
    b.work.flops = s.L * s.hkv * prompt * s.hd + vectors(p, prompt) * D;
    b.work.hbm_bytes = s.L * s.hkv * prompt * s.key_row + 2 * vectors(p, prompt) * D * s.bkv;
    b.work.launches = s.L + 2;
    out.push_back(b);
  }
  void decode_attention(const Deployment& d, const ParamValues& p, const StepShape& st, PhaseList& out) const override {
    const auto s = blocks::shape(d);
    const double n = st.context(), B = st.batch;
    const double D = s.L * s.hkv * s.hd;
    const double V = vectors(p, n), pages = std::ceil(n / p[kPage]);
    const double every = 1.0 / (p[kReselect] * p[kPage]);  // fraction of steps that reselect
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
    sel.work.flops = every * B * (V * D * 2 + p[kWindowPages] * D);
    sel.work.hbm_bytes = every * B * (V + p[kWindowPages]) * D * s.bkv;
    sel.work.launches = every * 2;
    out.push_back(sel);
    Phase mask{"hier_mask", PhaseKind::select, Device::gpu, ComputeUnit::simt, {}};
    mask.work.flops = every * B * V * 8;
    mask.work.hbm_bytes = every * B * (V * 4 * 4 + pages * 4);
    mask.work.launches = every * 6;
    out.push_back(mask);
    // A page filled every page_size steps: its mean key (all layers, KV heads), folded into its
    // chunk's and grid's vectors.
    Phase pv{"page_vector", PhaseKind::build, Device::gpu, ComputeUnit::simt, {}};
    pv.work.flops = B * D * 3;  // page_size D adds once per page_size steps, plus the chunk and grid updates
    pv.work.hbm_bytes = B * (p[kPage] * D * s.bkv + 3 * D * s.bkv) / p[kPage];
    pv.work.launches = 1;
    out.push_back(pv);
    // Per layer: paged attention over the working set (runs of one page per KV head).
    out.push_back(blocks::attention(d, "paged_attention", B, selected_tokens(p, n), p[kPage] * s.key_row, true));
  }
};
}  // namespace

const Policy& chess_policy() {
  static const ChessPolicy p;
  return p;
}

}  // namespace kvsim
