// A phase is one unit of work — a kernel, a copy, a CPU routine — described by what it moves and
// computes, not by how long it takes. Time comes from the roofline (roofline.hpp) and, for concurrent
// phases, from the discrete-event simulator (sim/). Phases repeated per layer are stored as totals
// over the step: the roofline of L identical instances is L times the roofline of one.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>

namespace kvsim {

// Which processor runs a phase (the JSON field `device`).
enum class Device : uint8_t { gpu, cpu, pcie };

// Which compute ceiling a phase's FLOPs run against: `tensor` is the tensor-core peak of the weight
// dtype (weight GEMMs), `tensor_act` that of the activation dtype (attention: q.k and p.v run in
// 16-bit even when the weights are fp8), `simt` the CUDA cores, `host` the CPU.
enum class ComputeUnit : uint8_t { tensor, tensor_act, simt, host };

// The kind of kernel behind a phase. Efficiencies are calibrated per kind (calibration.hpp), because a
// GEMM and an attention kernel reach different fractions of the same peak.
enum class PhaseKind : uint8_t {
  gemm,          // weight GEMM/GEMV (projections, MLP, LM head)
  attention,     // decode attention over a dense or paged KV cache
  prefill_attention,
  elementwise,   // norms, RoPE, residual adds, activations, KV append
  allreduce,     // tensor-parallel all-reduce over NVLink or PCIe
  score,         // a policy's scoring GEMV/GEMM against summaries, centroids or an observation window
  select,        // top-k, quantile thresholds, hierarchical masking, index dedup
  gather,        // index gathers and KV compaction (token- or block-granular copies inside one memory)
  copy,          // host<->device transfers through pinned memory
  host_kernel,   // CPU routines: rerank, sparse attention, partial-softmax work on the host
  build,         // prefill-time state building: pooling, low-rank factorization, index construction
  reconstruct,   // low-rank reconstruction of K, V on the GPU
  count
};
inline constexpr std::array<std::string_view, size_t(PhaseKind::count)> kPhaseKindNames = {
    "gemm",   "attention", "prefill_attention", "elementwise", "allreduce",  "score",
    "select", "gather",    "copy",              "host_kernel", "build",      "reconstruct"};

// What limits a phase's time: the largest term of its roofline.
enum class Bound { compute, hbm, dram, h2d, d2h, interconnect, latency };

constexpr std::string_view to_string(Device d) {
  switch (d) {
    case Device::gpu: return "gpu";
    case Device::cpu: return "cpu";
    case Device::pcie: return "pcie";
  }
  return "?";
}
constexpr std::string_view to_string(Bound b) {
  switch (b) {
    case Bound::compute: return "compute";
    case Bound::hbm: return "hbm";
    case Bound::dram: return "dram";
    case Bound::h2d: return "pcie_h2d";
    case Bound::d2h: return "pcie_d2h";
    case Bound::interconnect: return "interconnect";
    case Bound::latency: return "latency";
  }
  return "?";
}
constexpr std::string_view to_string(PhaseKind k) { return kPhaseKindNames[size_t(k)]; }

// Work in absolute units: FLOPs and bytes per memory tier and per link. `launches` counts kernels
// (each costs a fixed latency on the GPU); CPU phases and copies use it for call overheads. For a host
// phase that declares its pieces (Phase::lanes > 0) the launches are its separate host-kernel calls (a
// rerank or attention per sequence and KV head, say): each pays the host's measured call cost
// (Calibration::host_threads), shared out over the threads that run the phase, not the GPU's.
struct Work {
  double flops = 0;
  double hbm_bytes = 0;
  double dram_bytes = 0;
  double h2d_bytes = 0;
  double d2h_bytes = 0;
  double link_bytes = 0;  // bytes each GPU sends over NVLink/PCIe peer links (all-reduce)
  double launches = 0;
};

// Where a phase runs in time. Phases on one stream run in order (like a CUDA stream or a CPU
// thread pool working through a queue); phases on different streams may overlap unless a
// dependency (`after`) orders them. The GPU's main stream also carries the dense transformer.
enum class Stream : uint8_t { gpu = 0, gpu_side = 1, h2d = 2, d2h = 3, host = 4, count };

struct Phase {
  std::string_view name;  // static text, e.g. "attention"
  PhaseKind kind;
  Device device;
  ComputeUnit unit;
  Work work;
  // Contiguous bytes per run of a gather (a token's key row, a page, a sentence); 0 = streaming
  // access. Gathers of short runs reach a lower fraction of each bandwidth (calibration.hpp).
  double run_bytes = 0;
  // The work is the total of `repeat` identical instances, one per layer (repeat = L) or one per
  // step (repeat = 1). The simulator splits a per-layer phase into its layers. A whole count (layers,
  // chunks), exact in a float; a float keeps Phase at 128 bytes with lead_fraction below.
  float repeat = 1;
  Stream stream = Stream::gpu;
  // Extra dependencies inside one layer: indices into the policy's own phase list (-1 = none).
  // Every policy phase of a layer already waits for that layer's q/k/v projection, and the output
  // projection waits for every policy phase not marked `detached`.
  std::array<int8_t, 3> after{-1, -1, -1};
  bool detached = false;  // nothing waits for it inside the layer (an asynchronous update)
  // A host phase's independent pieces per instance (per layer): one per sequence and KV head for a
  // per-head rerank. It runs on min(lanes, the host's cores) threads, each at one core's compute and
  // DRAM bandwidth, and pays one parallel region (fork and join) per instance when that is more than
  // one thread (model/roofline.hpp, host_limits); its `launches` are then host calls. 0 = not declared: the phase
  // runs on every core and its launches cost GPU kernel latencies, as host phases always did.
  float lanes = 0;  // a count, exact in a float (a float, and one-byte enums, keep Phase at 128 bytes)
  // The leading share of the work that runs as kernels of its own before the rest: a concatenating
  // KV append (torch.cat of the cache) ahead of the attention kernel, on every resource in this
  // proportion, with all of the phase's launches but one. 0 = one piece. Only the simulator uses it,
  // to put a host-device sync between the two (Machine::sync_per_layer); alone, the two pieces take
  // exactly the phase's roofline time.
  double lead_fraction = 0;
  // The step's shape, set by the planner on every phase (0 = not known): the tokens each sequence
  // attends to and the sequences in the step. Efficiency curves may be measured against them. Whole
  // counts, exact in a float up to 16M (floats keep Phase at 128 bytes with the two fields below).
  float context_tokens = 0;
  float batch = 0;
  // A selection's shape per instance (kind select; 0 = not declared): the independent rows it selects
  // in (sequences x heads or groups) and the scores in each row. The kernel model of a top-k reads
  // them (model/kernel_model.hpp): how many blocks the kernel runs, and whether PyTorch takes its
  // multi-block path. Structural, so an amortized phase (work scaled by a fraction of steps) keeps them.
  float rows = 0;
  float row_elements = 0;
};
static_assert(sizeof(Phase) <= 128, "Phase is copied per layer and per design point: keep it at 128 bytes");

// The GPU kernels a phase launches: its launches, unless they are a host phase's host calls (lanes).
inline double gpu_launches(const Phase& p) {
  return p.unit == ComputeUnit::host && p.lanes > 0 ? 0.0 : p.work.launches;
}

}  // namespace kvsim
