// ctkvr: the CUDA kernels that implement its GPU phases (`kvsim validate --device emu`,
// policies/phase_kernels.hpp): the centroid cosines, top-C' probes and bitmap dedup of the recalled ids
// (opt::centroid_recall, one call per KV head), and the GPU share of attention over the resident sink
// and window tokens.
#include <algorithm>
#include <cmath>

#include "policies/ctkvr/params.hpp"
#include "policies/ctkvr/policy.hpp"
#include "policies/phase_kernels.hpp"

namespace kvsim::policies::ctkvr {

namespace {
void recall(const Deployment& d, const ParamValues& v, const StepShape& s) {
  const Params p = param_table().read(v);
  const int group = int(d.hq / d.hkv_cached), C = int(centroid_count(p, s.prompt));
  const int64_t keys = std::max<int64_t>(1, int64_t(s.context()));
  // Every KV head of the layer in one call: a block per head for the top C' and the dedup.
  kernel_blocks::centroid_recall(group, C, d.model->head_dim, int(centroid_ids(p)), int(p.probes), keys,
                                 int(d.hkv_cached));
}
}  // namespace

PhaseKernelLinks phase_kernels() {
  PhaseKernelLinks links;
  PhaseKernelLink cos;
  cos.phase = "centroid_recall";
  cos.kernels = "opt::centroid_recall: each group's cosines to every centroid (every KV head in one call)";
  cos.run = [](const Deployment& d, const ParamValues& v, const StepShape& s, const Phase&) { recall(d, v, s); };
  cos.launches = {"centroid_cosine_kernel"};
  links.push_back(cos);
  PhaseKernelLink dedup = cos;
  dedup.phase = "probe_dedup";
  dedup.kernels = "opt::centroid_recall: top C' probes, IVF ids into a shared bitmap, ordered compaction (one block per KV head, one call)";
  dedup.launches = {"recall_kernel"};
  links.push_back(dedup);
  // The CPU-rerank configuration's transfers (the default; the GPU rerank's key and value fetches are
  // not linked yet).
  for (const char* transfer : {"ids_to_host", "partials_to_gpu", "centroid_update"}) links.push_back(copy_link(transfer));
  links.push_back(attention_link("gpu_attention", nullptr, false));
  PhaseKernelLink merge;
  merge.phase = "merge";
  merge.kernels = "ref::merge_state (the CPU partials with the GPU's, in place)";
  merge.run = [](const Deployment& d, const ParamValues&, const StepShape&, const Phase&) {
    kernel_blocks::merge_states(int(d.hq), d.model->head_dim);
  };
  links.push_back(merge);
  return links;
}

}  // namespace kvsim::policies::ctkvr
