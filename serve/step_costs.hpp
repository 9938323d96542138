// What one engine iteration costs, from the existing phase models and simulator (model/plan.hpp) -- no
// second cost model -- made cheap enough to call hundreds of thousands of times.
//
// Why tables: one decode step of an offloading policy is a discrete-event simulation of a 32-layer DAG
// (a few microseconds for CTKVR through the periodic shortcut, model/step_simulation.hpp; ~0.7 ms
// before it); a 100,000-request run has ~10^5-10^6 iterations. The step cost is a smooth
// function of (batch, mean prompt, mean generated tokens), so it is evaluated exactly at the corners of
// a grid cell the first time the cell is used and interpolated (multilinearly) inside it. The grid:
// every batch up to 32, then steps of 1/16 of the batch; prompt and generated tokens on geometric
// grids of ratio 1 + 1/32. tests/test_serve_engine.cpp bounds the interpolation error against exact
// decode_step() calls at random points. Prefill is a function of one length and is tabulated on the
// same grid.
//
// Two policies' steps are not continuous in the prompt length, and no grid follows a step:
// interpolation averages it, which is what a batch of prompts of different lengths does. SEKV zooms
// whole spans (§3.3), so its step moves in steps as the prompt grows, with dips a few tokens wide (26 %
// of the step at batch 164 for prompts 24,562-24,566); CHESS's has a ~1.5 % step. The test bounds their
// median error; docs/serving.md gives their worst.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "model/deployment.hpp"
#include "model/policy.hpp"

namespace kvsim::serve {

// Memory one sequence holds, per GPU, from plan_memory(): the bytes that scale with the batch, in HBM
// and host DRAM.
struct SeqMemory {
  double hbm = 0, dram = 0;
};

// A sequence's footprint after its prompt (and first token) and after its whole output; in between it
// grows linearly with the tokens generated, as paged KV blocks are allocated token by token.
struct Footprint {
  SeqMemory first, last;
  SeqMemory at(int64_t generated, int64_t output) const;
};

class StepCosts {
 public:
  // `max_prompt`: the longest prompt of the workload (sizes the prefill workspace, as plan does).
  StepCosts(const Deployment& d, const Policy& pol, const ParamValues& params, int64_t max_prompt);

  // One decode step of `batch` sequences whose mean prompt and mean generated tokens are given.
  double decode(double batch, double prompt, double generated);
  // The exact value at a point (for the interpolation test and the closed-loop check).
  double decode_exact(double batch, double prompt, double generated) const;
  // Dense prefill of tokens [from, to) of one prompt: D(to) - D(from), D the prefill time of a prompt
  // of that many tokens (each chunk attends to everything before it, so the difference is the chunk's).
  double prefill_chunk(double from, double to);
  // The policy's own prefill work (index build, offload, summaries) for a prompt of `prompt` tokens,
  // charged to the iteration that finishes the prompt.
  double policy_prefill(double prompt);

  // Capacity for sequences after weights, workspace and the policy's fixed state (per GPU).
  double hbm_capacity() const { return hbm_cap_; }
  double dram_capacity() const { return dram_cap_; }
  // The footprint of a request of `prompt` and `output` tokens (memoized by the pair).
  const Footprint& footprint(int64_t prompt, int64_t output);

  int64_t decode_evaluations() const { return decode_evals_; }  // exact decode_step() calls made

  // Every decode and prefill time multiplied by these (default 1): a capacity search sized at the
  // pessimistic end of the plan's 80% range (model/uncertainty.hpp; serve/capacity.hpp).
  void scale_times(double decode, double prefill) { decode_scale_ = decode, prefill_scale_ = prefill; }

  const Deployment& deployment() const { return d_; }

 private:
  double grid_decode(int ib, int ip, int ig);
  double grid_prefill(int ix, bool policy);
  const Deployment& d_;
  const Policy& pol_;
  const ParamValues& params_;
  int64_t max_prompt_ = 0;
  double hbm_cap_ = 0, dram_cap_ = 0;
  std::unordered_map<uint64_t, double> decode_;   // key: grid indices
  std::unordered_map<uint64_t, double> prefill_;  // key: grid index, policy bit
  std::unordered_map<uint64_t, Footprint> memory_;  // key: prompt, output
  int64_t decode_evals_ = 0;
  double decode_scale_ = 1, prefill_scale_ = 1;
};

// The grids: a value's cell [lo, hi] as grid indices and the weight of hi.
struct Cell {
  int lo = 0, hi = 0;
  double w = 0;
};
enum class Axis { batch, prompt, generated };
Cell cell_of(Axis axis, double x);  // x clamped to the grid's range
double grid_at(Axis axis, int i);

}  // namespace kvsim::serve
