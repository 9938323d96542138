// Which CUDA kernels implement a policy's GPU phases, so that `kvsim validate --device emu` can put what
// those kernels move — 32-byte sectors, launches, host synchronizations, counted by the CUDA emulator
// (kernels/emu/counters.hpp) — beside what the phase model charges for the phase (issue #28, item 2).
// Each policy declares its links in its own folder (policies/<name>/kernels.cpp, the registry's
// `phase_kernels` face); the runner (phase_traffic.hpp) and the kernel building blocks below are shared
// and know no policy, the way blocks.hpp serves the cost models.
#pragma once
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "model/deployment.hpp"
#include "model/policy.hpp"

namespace kvsim {

struct PhaseKernelLink {
  std::string_view phase;  // the phase's name in the policy's cost model
  std::string kernels;     // what implements it, in words (the launchers)
  // Runs those kernels once through the emulator for one layer and one sequence of `d`, with the
  // policy's parameter values `p`, at the step shape `s`; `model` is the phase as the cost model built it
  // for that shape (a link may read its shape from it, e.g. the tokens an attention phase attends). The
  // runner holds a CountScope around the call.
  std::function<void(const Deployment& d, const ParamValues& p, const StepShape& s, const Phase& model)> run;
  // Which launches of `run` belong to this phase: kernel names as written at the launch, matched as
  // prefixes (a launcher that serves two phases, e.g. a score kernel and the selection after it). Empty:
  // every launch of the run.
  std::vector<std::string> launches = {};
  // The phase's work is per step; a phase that runs only on some steps (a reselection every few pages)
  // is amortized in the model. This turns the model's per-step work back into one run's: 1 = none.
  std::function<double(const ParamValues& p)> runs_per_step = nullptr;
  // The kernels' fetched sector bytes over the model's bytes must lie in [low, high]. A range wider than
  // [0.9, 1.1] would have to say why (printed in the report); since issue 42 item 2 none is wider, and
  // the test holds every link to [0.9, 1.1] (docs/validation/phase-bytes.md).
  double low = 0.9, high = 1.1;
  std::string why = {};
};
// A policy's links, and the parameter values the probe runs it at when its defaults leave a linked
// phase without work at the probe's shape (SEKV's budget leaves no room to zoom at 16K tokens): then
// `probe` changes the defaults and `probe_why` says what and why (printed with the table).
struct PhaseKernelLinks : std::vector<PhaseKernelLink> {
  PhaseKernelLinks() = default;
  PhaseKernelLinks(std::initializer_list<PhaseKernelLink> links) : std::vector<PhaseKernelLink>(links) {}
  std::function<void(ParamValues& values)> probe = nullptr;
  std::string probe_why = {};
};

// Kernel building blocks for the links: each allocates its inputs (seeded random values), runs the
// optimized kernel (kernels/optimized) or, where none exists, the reference CUDA twin, through the
// emulator, and frees everything. Shapes are one sequence of one layer of `d` (its per-GPU heads).
namespace kernel_blocks {
// Split-KV paged decode attention with GQA over `tokens` tokens in pages of `page_size`: the pages in
// cache order (dense) or every other page of a cache twice as long (a selected page list).
void paged_attention(const Deployment& d, double tokens, int page_size, bool scattered);
// Top-k over `rows` rows of `n` fp32 scores (rank order).
void topk(int rows, int64_t n, int64_t k);
// CHESS-style score GEMV over grid + chunk + page summaries of `dim`, then the hierarchical select.
void hierarchical_select(int64_t pages, int pages_per_chunk, int chunks_per_grid, int dim, double rho_g,
                         double rho_c, double rho_p);
// Cosine of the group's queries to C centroids, top C', union of their IVF lists (rho ids each) over
// `num_keys` keys.
void centroid_recall(int group, int centroids, int dim, int rho, int c_prime, int64_t num_keys, int heads = 1);
// The score GEMV a deployment runs (opt::group_scores): every query head of `kv_heads` groups of `group`
// against its KV head's `vectors` rows of `dim`, one launch; `bounds`: Quest's page bounds over each
// page's channel minima and maxima instead of dots.
void group_scores(int group, int64_t vectors, int dim, int kv_heads, bool bounds);
// Quest's page select (opt::quest_select_pages: the last page and the best k - 1 others, ascending;
// `rows` selections in one call).
void page_select(int64_t pages, int64_t k, int rows = 1);
// SEKV's routing as a deployment runs it: `heads` query heads, each its own [dim, d_proj] projection and
// `spans` summaries, every gate in one launch (opt::route_gates). Its zoom over `spans` gates of `rows`
// query heads, spans of span_tokens, a budget of `room` tokens (opt::sekv_zoom); and its reconstruction
// of `spans` zoomed spans of span_tokens at rank `rank`, K and V of `kv_heads` KV heads
// (opt::sekv_reconstruct).
void sekv_route_gates(int heads, int dim, int d_proj, int64_t spans);
void sekv_zoom(int64_t spans, double threshold, int rows, int span_tokens, double room);
void sekv_reconstruct(int64_t spans, int span_tokens, int rank, int dim, int kv_heads);
// Merge of two softmax states of `rows` rows of `dim` (the reference twin), in place into the first.
void merge_states(int rows, int dim);
// Mean of each of `segments` segments of `rows_per_segment` rows of `dim` (the reference twin).
void segment_means(int64_t segments, int rows_per_segment, int dim);
// The staging gather of `rows` rows of `row_elems` floats from mapped pinned host memory, in runs of
// `run_rows` adjacent rows.
void gather_runs(int64_t rows, int64_t row_elems, int64_t run_rows);
// A host<->device transfer of `bytes`: to the device in runs of `run_bytes` from mapped pinned host
// memory (opt::gather_runs, the zero-copy staging gather: each run one row, every other row of a source
// twice as long, so no two runs merge), or as one cudaMemcpyAsync between a pinned host buffer and the
// device (run_bytes 0, or to the host).
void transfer(double bytes, double run_bytes, bool to_device);
// CHESS's uncertainty monitor over `rows` rows of `vocab` logits (opt::uncertainty).
void uncertainty(int64_t vocab, int rows = 1);
}  // namespace kernel_blocks

// The link of a phase built by blocks::copy: the transfer it models, per layer and sequence, read back
// from the phase (its h2d or d2h bytes and run length), so the link cannot drift from the cost model.
// runs_per_step: the phase's amortization (a copy made on some steps only), or null for every step.
PhaseKernelLink copy_link(std::string_view phase, std::function<double(const ParamValues&)> runs_per_step = nullptr);

// The link of a phase built by blocks::attention: paged decode attention over the tokens it attends
// (read back from the phase's FLOPs, the inverse of blocks::attention's count, so the link cannot
// drift from the cost model's token count), in pages of page_size(p) tokens, dense or scattered.
PhaseKernelLink attention_link(std::string_view phase, std::function<int(const ParamValues&)> page_size,
                               bool scattered);
// Tokens an attention phase of blocks::attention attends per sequence and layer, from its FLOPs.
double attended_tokens(const Deployment& d, const StepShape& s, const Phase& model);
// Vectors a scoring phase of blocks::score scores per head, from its FLOPs: `heads` heads of `dim`.
double scored_vectors(const Deployment& d, const StepShape& s, const Phase& model, double heads, double dim);

}  // namespace kvsim
