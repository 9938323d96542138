// chess selector (seed 000, CHESS: Context-aware Hierarchical Efficient Semantic Selection).
//
// State (§3.1, eq. 1-2): pages of B = page_size tokens at absolute positions [iB, (i+1)B). Page vector
// = the mean key of the page in every stored layer and KV head, flattened in (layer slot, KV slot)
// order, D = Ls * Hks * d (ref::chess_page_vectors). Prompt pages are built at prefill; a generated
// page's vector is built when the page is needed (its mean over the tokens it has so far while it
// fills). Chunk vectors = means of chunk_pages page vectors, grid vectors = means of grid_chunks chunk
// vectors (ref::group_mean; partial last groups average what exists).
//
// Selection (§3.2, Algorithm 1), at a reselection at decode position p (cache = tokens 0..p,
// N = ceil((p+1)/B) pages, the last possibly partial):
//   * anchor = mean of the last W = window_pages page vectors (eq. 3, ref::tail_mean), the partial
//     current page included with the mean of the tokens it holds (each page weighs 1/W, as in eq. 3);
//   * candidates are the "historical segments" (§3.2): pages 0 .. N-W-1, all complete; their chunk
//     and grid vectors are built over them;
//   * ONE scoring product (ref::score_gemv) of the anchor against the concatenation [grids; chunks;
//     pages] (Algorithm 1 lines 2-4), split back per level;
//   * hierarchical masking with quantile thresholds rho_grid, rho_chunk, rho_page
//     (ref::chess_hierarchical_select, QuantileScope::survivors: the quantile of a level is taken over
//     the children of kept parents, the paper's text; a child of a pruned parent is never kept);
//   * context = kept pages U the first sink_pages U the last W pages (ref::chess_context_pages),
//     and every token <= p of those pages is attended, the same set for every (layer, KV head): one
//     global page list, as the zero-copy paged attention rewrites FlashInfer's `indices` (§4.3).
// Between reselections the selected page list is kept and every page allocated since (the window at
// the reselection and the pages generated after it) is appended, as a page table grows: nothing is
// dropped until the next reconstruction.
//
// Reselection (§3.3, Fig. 4, §5.1): the paper reconstructs only when generation becomes uncertain:
// per KV-cache page, the average entropy and average varentropy of its tokens; thresholds are the 99th
// percentiles calibrated offline; the pruned (= reconstruct) region of Fig. 4 is the upper-right
// quadrant, i.e. BOTH above their thresholds. With no calibration set here, the thresholds are the 99th
// percentiles (linear interpolation) of the per-page averages of the trace's own first
// ceil(reselect_pages) complete generated pages (the calibration pages); while calibrating, and
// throughout when the trace has no entropy/varentropy, selection re-runs every
// round(reselect_pages * page_size) decode steps (the analytical default). After calibration, a
// reselection happens at the step whose token completes a page whose averages exceed both thresholds.
// The first decode step always selects.
//
// Statistics: "reselect_pages" = generated pages (decoded tokens / B) per selection, the first one
// included (the cost-model parameter); "reselections" (selections made, the first included);
// "triggered_reselections" (uncertainty triggers after calibration); "selected_fraction"
// (attended / (p+1)); "entropy_threshold", "varentropy_threshold" (when calibrated).
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "policies/kernel_selector.hpp"
#include "policies/chess/params.hpp"
#include "policies/chess/policy.hpp"

namespace kvsim::policies::chess {
using namespace kvsim::replay;

namespace {

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double x = q * double(v.size() - 1);
  const size_t i = size_t(std::floor(x));
  const double f = x - double(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

class ChessSelector final : public KernelSelector {
 public:
  explicit ChessSelector(const ParamValues& values) {
    const Params p = param_table().read(values);
    B_ = std::max(1, int(p.page_size));
    Nc_ = std::max(1, int(p.chunk_pages));
    Ng_ = std::max(1, int(p.grid_chunks));
    rg_ = p.rho_grid, rc_ = p.rho_chunk, rp_ = p.rho_page;
    sinks_ = std::max<int64_t>(0, int64_t(p.sink_pages));
    W_ = std::max<int64_t>(1, int64_t(p.window_pages));
    reselect_pages_ = p.reselect_pages;
    interval_ = std::max<int64_t>(1, int64_t(std::llround(p.reselect_pages * B_)));
    calib_pages_ = std::max<int64_t>(1, int64_t(std::ceil(p.reselect_pages)));
  }

  void prefill(const TraceData& tr) override {
    D_ = int64_t(tr.layers) * tr.kv_heads * tr.d;
    T_ = tr.T;
    const int64_t pages = (tr.P + B_ - 1) / B_;
    full_pages_ = tr.P / B_;  // complete prompt pages; the partial one is rebuilt on demand
    vecs_.assign(size_t(std::max<int64_t>(pages, 1)) * D_, 0.f);
    if (full_pages_ > 0) {
      std::vector<const float*> src;
      for (int l = 0; l < tr.layers; ++l)
        for (int h = 0; h < tr.kv_heads; ++h) src.push_back(tr.k(l, h));
      kernels().chess_page_vectors({.sources = src.data(), .count = int64_t(src.size()), .n = full_pages_ * B_,
                                    .d = tr.d, .page_size = B_, .out = vecs_.data()});
    }
    const auto& tok = tr.source->tokens();
    has_entropy_ = !tok.entropy.empty() && !tok.varentropy.empty();
    calibrated_ = false;
    calib_H_.clear(), calib_V_.clear();
    selected_.clear();
    last_select_ = -1;
    first_pos_ = last_pos_ = -1;
    next_page_ = tr.P / B_;  // the first page holding a generated token
    grow_from_ = 0;
    selections_ = triggered_ = sel_n_ = 0;  // a new trace: statistics start over
    sel_sum_ = sel_pages_ = 0;
  }

  void select(const TraceData& tr, int64_t s, std::vector<HeadSelection>& out) override {
    const int64_t P = tr.P, p = tr.position(s);
    if (first_pos_ < 0) first_pos_ = p;
    last_pos_ = p;
    bool reselect = last_select_ < 0;
    // Uncertainty monitor: every page completed by token p (or, when the trace skips query rows, since
    // the last row), its average entropy and varentropy over its generated tokens.
    bool trigger = false;
    if (has_entropy_)
      for (; (next_page_ + 1) * B_ <= p + 1; ++next_page_) {
        const auto& tok = tr.source->tokens();
        const int64_t a = std::max(P, next_page_ * B_), e = (next_page_ + 1) * B_;
        double H = 0, V = 0;
        for (int64_t t = a; t < e; ++t) H += tok.entropy[size_t(t - P)], V += tok.varentropy[size_t(t - P)];
        H /= double(e - a), V /= double(e - a);
        if (!calibrated_) {
          calib_H_.push_back(H), calib_V_.push_back(V);
          if (int64_t(calib_H_.size()) >= calib_pages_) {
            tau_H_ = percentile(calib_H_, 0.99), tau_V_ = percentile(calib_V_, 0.99);
            calibrated_ = true;
          }
        } else if (H > tau_H_ && V > tau_V_) {
          trigger = true;
        }
      }
    if (trigger && !reselect) ++triggered_;
    reselect = reselect || trigger;
    if (!calibrated_ && last_select_ >= 0 && p - last_select_ >= interval_) reselect = true;
    if (reselect) do_select(tr, p);

    // The context: the selected pages + every page allocated since the selection (the window grows).
    const int64_t npages = (p + 1 + B_ - 1) / B_;
    std::vector<int32_t> pages = selected_;
    for (int64_t i = grow_from_; i < npages; ++i) pages.push_back(int32_t(i));
    pages = kernels().dedup({.ids = pages.data(), .n = int64_t(pages.size())});
    std::vector<int32_t> toks;
    for (int32_t pg : pages)
      for (int64_t t = int64_t(pg) * B_; t < std::min<int64_t>(p + 1, (int64_t(pg) + 1) * B_); ++t)
        toks.push_back(int32_t(t));
    for (auto& o : out) o.tokens = toks;
    sel_sum_ += double(toks.size()) / double(p + 1);
    ++sel_n_;
  }

  std::map<std::string, Statistic> statistics() const override {
    std::map<std::string, Statistic> m;
    const double gen_pages = first_pos_ >= 0 ? double(last_pos_ - first_pos_ + 1) / double(B_) : 0;
    m[param_table().name(&Params::reselect_pages)] = {
        selections_ ? gen_pages / double(selections_) : reselect_pages_, selections_,
        "generated pages (decoded tokens / page_size) per selection, the first included"};
    m["reselections"] = {double(selections_), selections_, "selections made (the first decode step included)"};
    m["triggered_reselections"] = {double(triggered_), triggered_,
                                   "reselections triggered by page entropy AND varentropy above the calibrated 99th percentiles"};
    m["selected_fraction"] = {sel_n_ ? sel_sum_ / double(sel_n_) : 0, sel_n_, "attended tokens / (p + 1) per decode step"};
    m["selected_pages"] = {selections_ ? sel_pages_ / double(selections_) : 0, selections_,
                           "pages kept by the hierarchical selection per selection (before sinks and window)"};
    if (calibrated_) {
      m["entropy_threshold"] = {tau_H_, int64_t(calib_H_.size()), "99th percentile of calibration pages' mean entropy"};
      m["varentropy_threshold"] = {tau_V_, int64_t(calib_V_.size()),
                                   "99th percentile of calibration pages' mean varentropy"};
    }
    return m;
  }

 private:
  // Page vector of page i over tokens [iB, min((i+1)B, n)) into vecs_ (grown as needed).
  void build_page(const TraceData& tr, int64_t i, int64_t n) {
    if (size_t(i + 1) * D_ > vecs_.size()) vecs_.resize(size_t(i + 1) * D_, 0.f);
    const int64_t a = i * B_, cnt = std::min<int64_t>(n, a + B_) - a;
    std::vector<const float*> src;
    for (int l = 0; l < tr.layers; ++l)
      for (int h = 0; h < tr.kv_heads; ++h) src.push_back(tr.k(l, h) + a * tr.d);
    kernels().chess_page_vectors({.sources = src.data(), .count = int64_t(src.size()), .n = cnt, .d = tr.d,
                                  .page_size = B_, .out = vecs_.data() + size_t(i) * D_});
  }

  void do_select(const TraceData& tr, int64_t p) {
    const int64_t n = p + 1, npages = (n + B_ - 1) / B_;
    // Complete pages not built yet, then the partial last page (rebuilt every time).
    const int64_t complete = n / B_;
    for (; full_pages_ < complete; ++full_pages_) build_page(tr, full_pages_, n);
    if (npages > complete) build_page(tr, complete, n);
    const int d = int(D_);
    std::vector<float> anchor(static_cast<size_t>(D_));
    kernels().tail_mean({.X = vecs_.data(), .m = npages, .d = d, .w = W_, .out = anchor.data()});
    const int64_t hist = std::max<int64_t>(0, npages - W_);
    std::vector<int32_t> kept;
    if (hist > 0) {
      const int64_t nc = (hist + Nc_ - 1) / Nc_, ng = (nc + Ng_ - 1) / Ng_;
      std::vector<float> all(size_t(ng + nc + hist) * D_);
      float* grids = all.data();
      float* chunks = grids + size_t(ng) * D_;
      float* pages = chunks + size_t(nc) * D_;
      std::copy_n(vecs_.data(), size_t(hist) * D_, pages);
      kernels().group_mean({.X = pages, .m = hist, .d = d, .group = Nc_, .out = chunks});
      kernels().group_mean({.X = chunks, .m = nc, .d = d, .group = Ng_, .out = grids});
      std::vector<float> scores(static_cast<size_t>(ng + nc + hist));
      kernels().score_gemv({.q = anchor.data(), .M = all.data(), .n = ng + nc + hist, .d = d,
                            .scores = scores.data()});  // one product
      kept = kernels()
                 .chess_select({.grid_scores = scores.data(), .chunk_scores = scores.data() + ng,
                                .page_scores = scores.data() + ng + nc, .pages = hist, .pages_per_chunk = Nc_,
                                .chunks_per_grid = Ng_, .rho_g = rg_, .rho_c = rc_, .rho_p = rp_})
                 .pages;
    }
    sel_pages_ += double(kept.size());
    selected_ = kernels().chess_context_pages(
        {.selected = kept.data(), .count = int64_t(kept.size()), .num_pages = npages, .sink_pages = sinks_,
         .window_pages = W_});
    grow_from_ = npages;
    last_select_ = p;
    ++selections_;
  }

  int B_ = 32, Nc_ = 8, Ng_ = 8;
  double rg_ = 0.5, rc_ = 0.2, rp_ = 0.1, reselect_pages_ = 10;
  int64_t sinks_ = 1, W_ = 4, interval_ = 320, calib_pages_ = 10;
  int64_t D_ = 0, T_ = 0, full_pages_ = 0;
  std::vector<float> vecs_;  // [pages][D]
  bool has_entropy_ = false, calibrated_ = false;
  std::vector<double> calib_H_, calib_V_;
  double tau_H_ = 0, tau_V_ = 0;
  std::vector<int32_t> selected_;  // context pages at the last selection
  int64_t next_page_ = 0, grow_from_ = 0, last_select_ = -1, first_pos_ = -1, last_pos_ = -1;
  int64_t selections_ = 0, triggered_ = 0, sel_n_ = 0;
  double sel_sum_ = 0, sel_pages_ = 0;
};
}  // namespace

std::unique_ptr<TraceSelector> make_selector(const ParamValues& p) { return std::make_unique<ChessSelector>(p); }

}  // namespace kvsim::policies::chess
