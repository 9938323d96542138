// ctkvr (seed 004, CTKVR: centroid-then-token KV retrieval).
// Prefill (§3.1.1, Algorithm 1): the last C prompt queries are the centroids (C = 1024 by default, App.
// C.2's system setting; 0 selects §4.1.1's accuracy setup C = min(2048, n/16): centroid_count in
// params.hpp); each attends to every key; per KV head (max over its query group) the top rho keys per
// centroid (rho = 2.5 rho' by default, §4.1.1: centroid_ids) form the inverted file
// qcIVF[B, Hkv, C, rho] (int32, footnote 5). All KV except init_tokens + local_tokens is offloaded to
// CPU DRAM (§3.2, Fig. 4).
// Decode (§3.1.2, Algorithm 2, §3.2): on the GPU, cosine(q, centroids), max over the group, top-C'
// centroids per KV head, then gather + dedup of their rho * C' key ids (L_recall = rho C' alpha,
// alpha ~ 0.5 measured, footnote 6 and App. C.2); q and the ids go to the CPU, which reranks the
// recalled keys by q.k, keeps the top rho', and computes sparse attention over them from DRAM; the GPU
// attends over init + local meanwhile (CUDA multi-streaming, §3.2); the partial softmax states are
// merged on the GPU. The FIFO centroid update (§3.1.3) runs asynchronously, off the critical path.
// rerank_on = gpu is a variant kvsim adds for comparison: the recalled keys and the chosen values are
// copied to the GPU, which reranks and attends (no CPU compute).
#include "core/format.hpp"
#include "policies/blocks.hpp"
#include "model/policy.hpp"
#include "policies/ctkvr/params.hpp"
#include "policies/ctkvr/policy.hpp"

namespace kvsim::policies::ctkvr {

namespace {
enum RerankOn { kCpu = 0, kGpu = 1 };

class CtkvrPolicy final : public Policy {
 public:
  std::string_view name() const override { return "ctkvr"; }
  std::string_view summary() const override {
    return "query-centroid inverted file on GPU, KV in CPU DRAM; CPU rerank + sparse attention beside GPU attention (seed 004)";
  }
  const std::vector<ParamSpec>& params() const override { return param_table().specs(); }
  const std::vector<BudgetKnob>& budget_knobs() const override { return param_table().knobs(); }
  static double gpu_tokens(const Params& p, double n) { return std::min(n, p.init_tokens + p.local_tokens); }
  // How the CPU side runs (§3.2 says only that the rerank and the sparse attention of the offloaded
  // tokens are computed on the CPU, beside the GPU, with no word on threads or calls; kvsim reads it as
  // its own native host kernels, kernels/host/, which work per KV head): one call per sequence, KV head
  // and layer, each an independent piece for the host's threads, B·hkv of them per layer.
  static void host_pieces(Phase& p, double B, const blocks::Shape& s) {
    p.lanes = float(B * s.hkv);
    p.work.launches = s.L * B * s.hkv;  // host calls (with lanes), not GPU kernels
  }
  static double recall(const Params& p, double offloaded) {
    return std::min(offloaded, centroid_ids(p) * p.probes * p.dedup);
  }
  // The index is CTKVR's price for offloading: the qcIVF (C·rho ids per KV head) and the centroid
  // queries stay in HBM so that the KV of all but init + local tokens can leave it. When the index is the
  // larger of the two, offloading costs HBM instead of freeing it, and the largest batch can fall below
  // full KV's. On Llama-3.1-8B (per layer: 90,112 B of index per centroid, 4,096 B of KV per token) it happens
  // below about 52K tokens with §4.1.1's accuracy setup C = min(2048, n/16), rho = 2560, and below about
  // 29K with App. C.2's C = 1024.
  void notes(const Deployment& d, const ParamValues& values, double prompt, double output,
             std::vector<std::string>& out) const override {
    const MemoryDemand m = memory(d, values, prompt, output);
    if (m.index_hbm_per_seq <= m.kv_dram_per_seq) return;
    const Params p = param_table().read(values);
    const auto mib = [](double b) { return fmt("%.1f", b / double(1 << 20)); };
    out.push_back("the index exceeds the KV it replaces: qcIVF and centroid queries take " + mib(m.index_hbm_per_seq) +
                  " MiB of HBM per sequence (C = " + fmt("%.0f", centroid_count(p, prompt)) +
                  " centroids x rho = " + fmt("%.0f", centroid_ids(p)) + " ids per KV head and layer), more than the " +
                  mib(m.kv_dram_per_seq) + " MiB of KV it moves to host DRAM; fewer centroids or per_centroid ids, "
                  "or a longer context, make offloading pay");
  }
  MemoryDemand memory(const Deployment& d, const ParamValues& values, double prompt, double output) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    MemoryDemand m;
    const double n = prompt + output;
    m.kv_hbm_per_seq = gpu_tokens(p, n) * d.kv_bytes_per_token();
    const double C = centroid_count(p, prompt);
    const double index = s.L * s.hkv * C * centroid_ids(p) * 4;     // qcIVF, int32 (footnote 5)
    const double centroids = s.L * s.hq * C * s.hd * d.ba;  // the centroid queries
    m.index_hbm_per_seq = index + centroids;  // reported per layer in the plan (MemoryReport)
    m.hbm_per_seq = m.kv_hbm_per_seq + m.index_hbm_per_seq;
    m.kv_dram_per_seq = std::max(0.0, n - gpu_tokens(p, n)) * d.kv_bytes_per_token();
    m.dram_per_seq = m.kv_dram_per_seq;
    m.hbm_fixed = blocks::prompt_layer_kv(d, prompt);
    return m;
  }
  void prefill(const Deployment& d, const ParamValues& values, double prompt, PhaseList& out) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    const double C = centroid_count(p, prompt);
    // Centroid attention over all keys (softmax, max over the group), then top-rho per centroid.
    // Unlike the observation-window policies the scores are not summed over the window: each centroid's
    // row (max over the group) is written for qcivf_topk to select from, hkv * C * n fp32 per layer.
    Phase cs = blocks::window_scores(d, "centroid_scores", prompt, C, s.L);
    cs.work.hbm_bytes += s.L * s.hkv * C * prompt * 4;
    out.push_back(cs);
    Phase top = blocks::select("qcivf_topk", 1, s.hkv * C, prompt, centroid_ids(p), s.L);
    out.push_back(top);
    out.push_back(blocks::copy("offload", false, 1, std::max(0.0, prompt - gpu_tokens(p, prompt)) * s.kv_row, 0, s.L));
  }
  void decode_attention(const Deployment& d, const ParamValues& values, const StepShape& st, PhaseList& out) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    const double B = st.batch, n = st.context();
    const double offloaded = std::max(0.0, n - gpu_tokens(p, n));
    const double C = centroid_count(p, st.prompt), Lr = recall(p, offloaded);
    const double chosen = std::min(p.budget_tokens, Lr);
    // 0: cosine similarity of q to the centroids (each query head its own centroids).
    out.push_back(blocks::score(d, "centroid_recall", B, s.hq, s.hq, C, s.hd, d.ba, s.L));
    // 1: max over the group, top-C' per KV head; gather the C' rho ids and dedup to L_recall.
    Phase dd = blocks::select("probe_dedup", B, s.hkv, C, p.probes, s.L);
    // The select reads every query head's cosines, the group's maximum taken as they are read
    // (docs/validation/phase-bytes.md, rule 3).
    dd.work.hbm_bytes += s.L * B * (s.hq - s.hkv) * C * 4;
    dd.work.hbm_bytes += s.L * B * s.hkv * (p.probes * centroid_ids(p) + Lr) * 4;
    dd.work.flops += s.L * B * s.hkv * p.probes * centroid_ids(p) * 2;
    out.push_back(dd);
    if (int(p.rerank_on) == kCpu) {
      // 2: q and the recalled ids to the host; the token sliding out of the local window to DRAM.
      Phase down = blocks::copy("ids_to_host", false, B, s.hq * s.hd * d.ba + s.hkv * Lr * 4 + s.kv_row, 0, s.L);
      down.after = {1, -1, -1};
      out.push_back(down);
      // 3: rerank: gather the recalled keys (runs of one key row), q.k for the group, top rho'.
      Phase rr = blocks::host("cpu_rerank", B, s.hkv * Lr * (2 * s.hd * s.group + 4), s.hkv * Lr * s.key_row,
                              s.key_row, s.L);
      rr.after = {2, -1, -1};
      host_pieces(rr, B, s);
      out.push_back(rr);
      // 4: sparse attention over the rho' chosen tokens' K and V from DRAM.
      Phase ca = blocks::host("cpu_attention", B, s.hq * chosen * (4 * s.hd + 5), s.hkv * chosen * 2 * s.key_row,
                              s.key_row, s.L);
      host_pieces(ca, B, s);
      out.push_back(ca);
      // 5: partial outputs and log-sum-exp back to the GPU (fp32).
      Phase up = blocks::copy("partials_to_gpu", true, B, s.hq * (s.hd + 1) * 4, 0, s.L);
      up.after = {4, -1, -1};
      out.push_back(up);
      // 6: GPU attention over init + local, beside the CPU work.
      out.push_back(blocks::attention(d, "gpu_attention", B, gpu_tokens(p, n), 0, true));
      // 7: merge the two softmax states.
      Phase merge = blocks::layer_phase("merge", PhaseKind::elementwise, Device::gpu, ComputeUnit::simt, Stream::gpu, s.L);
      merge.work.flops = s.L * B * s.hq * s.hd * 6;
      merge.work.hbm_bytes = s.L * B * s.hq * s.hd * 4 * 3;
      merge.work.launches = s.L;
      merge.after = {5, -1, -1};
      out.push_back(merge);
      // 8: FIFO centroid update: the chosen ids appended to the index, asynchronously.
      Phase fifo = blocks::copy("centroid_update", true, B, s.hkv * centroid_ids(p) * 4, 0, s.L);
      fifo.after = {3, -1, -1};
      fifo.detached = true;
      out.push_back(fifo);
    } else {
      // 2: the recalled keys gathered from pinned DRAM into the GPU (runs of one key row).
      Phase keys = blocks::copy("recall_keys_h2d", true, B, s.hkv * Lr * s.key_row, s.key_row, s.L);
      keys.after = {1, -1, -1};
      out.push_back(keys);
      // 3: GPU rerank of the recalled keys (after the copy).
      Phase rr = blocks::score(d, "gpu_rerank", B, s.hq, s.hkv, Lr, s.hd, s.bkv, s.L);
      rr.after = {2, -1, -1};
      out.push_back(rr);
      // 4: top rho' of the reranked keys per KV head, as the CPU variant's rerank does.
      Phase top = blocks::select("rerank_topk", B, s.hkv, Lr, chosen, s.L);
      top.after = {3, -1, -1};
      out.push_back(top);
      // 5: the chosen tokens' values from DRAM.
      Phase vals = blocks::copy("values_h2d", true, B, s.hkv * chosen * s.key_row, s.key_row, s.L);
      vals.after = {4, -1, -1};
      out.push_back(vals);
      // 6: attention over init + local + the chosen tokens. The chosen keys and values sit contiguous in
      // the staging buffer the copies filled, so this is a streaming read (run_bytes 0).
      Phase a = blocks::attention(d, "attention", B, gpu_tokens(p, n) + chosen, 0, true);
      a.after = {5, -1, -1};
      out.push_back(a);
      // 7: the token sliding out of the local window goes to DRAM, as in the CPU variant, off the
      // critical path.
      Phase evict = blocks::copy("evict_to_host", false, B, s.kv_row, 0, s.L);
      evict.detached = true;
      out.push_back(evict);
      // 8: FIFO centroid update (§3.1.3): the chosen ids appended to the GPU-resident index.
      Phase fifo = blocks::gather("centroid_update", B * s.hkv * centroid_ids(p) * 4, 0, s.L);
      fifo.after = {4, -1, -1};
      fifo.detached = true;
      out.push_back(fifo);
    }
  }
};
}  // namespace

const Policy& cost_model() {
  static const CtkvrPolicy p;
  return p;
}

}  // namespace kvsim::policies::ctkvr
