// One serving replica, iteration by iteration: continuous batching with a token budget per iteration
// that mixes prefill chunks and decodes (vLLM's and Sarathi-Serve's scheduler shape), admission by
// memory, and preemption when memory runs out. Each iteration's time comes from StepCosts (the phase
// models and simulator of model/), never from a second cost model. docs/serving.md, "Engine model",
// gives the choices and why.
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "serve/step_costs.hpp"
#include "serve/workload.hpp"

namespace kvsim::serve {

enum class Preemption { recompute, swap };
const char* preemption_name(Preemption p);

struct EngineConfig {
  int64_t token_budget = 8192;  // tokens per iteration: one per decoding request plus prefill chunk tokens
  int64_t chunk_tokens = 2048;  // the most prompt tokens one request prefills in one iteration
  int64_t max_running = 0;      // requests in the batch at once; 0 = memory decides
  Preemption preemption = Preemption::recompute;
  bool record_iterations = false;  // keep every IterationRecord (timeline, time series)
};

struct RequestResult {
  int64_t id = 0;
  int replica = 0;
  double arrival_s = 0, first_token_s = -1, finish_s = -1;
  int64_t prompt_tokens = 0, output_tokens = 0;
  int preemptions = 0;
  bool rejected = false;  // never admitted: one request alone does not fit
  double ttft() const { return first_token_s - arrival_s; }
  double e2e() const { return finish_s - arrival_s; }
  // Mean time per output token after the first (0 for one-token outputs).
  double tpot() const { return output_tokens > 1 ? (finish_s - first_token_s) / double(output_tokens - 1) : 0; }
};

struct IterationRecord {
  double start_s = 0, seconds = 0;
  int decodes = 0, prefills = 0;  // requests decoding, requests prefilling a chunk
  int64_t prefill_tokens = 0;
  int running = 0, waiting = 0;   // after admission; waiting = arrived, not running
  double hbm_used = 0, dram_used = 0;  // bytes held by sequences, per GPU
  int preempted = 0;
};

// Running totals every run keeps (no per-iteration storage needed).
struct EngineTotals {
  int64_t iterations = 0, preemptions = 0, rejected = 0;
  double busy_s = 0;             // time inside iterations
  double in_system_area = 0;     // ∫ (running + waiting) dt over iterations: Little's L · time
  double waiting_area = 0;       // ∫ waiting dt
  double batch_area = 0;         // ∫ running dt
  double hbm_area = 0, dram_area = 0;
  double hbm_peak = 0, dram_peak = 0;
  double swap_bytes = 0;
};

class Engine {
 public:
  Engine(StepCosts& costs, const EngineConfig& cfg, int replica = 0);

  // Adds a request; arrivals must not decrease. It joins the batch at the first iteration that starts
  // at or after its arrival.
  void submit(const Request& r);
  // Runs iterations while there is work and the clock is before t; an idle engine's clock jumps to t.
  void advance_to(double t);
  // One iteration if there is work that has arrived; false (nothing done) otherwise.
  bool step();
  void drain();  // iterations until every submitted request has finished or been rejected

  double now() const { return now_; }
  int64_t outstanding() const { return int64_t(waiting_.size() + running_.size()); }
  int64_t finished() const { return finished_; }
  // Every submitted request, by submission order; finished ones have finish_s >= 0.
  const std::vector<RequestResult>& results() const { return results_; }
  const std::vector<IterationRecord>& iterations() const { return records_; }
  const EngineTotals& totals() const { return totals_; }
  double hbm_capacity() const { return costs_.hbm_capacity(); }

 private:
  struct Seq {
    int64_t index = 0;         // into results_
    int64_t prompt = 0, output = 0;
    int64_t to_prefill = 0;    // prompt tokens (plus recomputed ones) this admission must process
    int64_t prefilled = 0, generated = 0;
    Footprint footprint;       // what it holds as it generates (StepCosts::footprint)
    SeqMemory held;            // bytes held now
    bool swapped = false;      // preempted by swap: its KV is in host memory
  };
  void preempt_last(double& transfer_s);
  // Pieces of step(), the hot path: members that work on the engine's state in place.
  void admit(int64_t& budget, double& seconds, double hbm_cap, double dram_cap);  // queue -> batch, with chunks
  void apply_tokens();  // emit this iteration's tokens, retire finished requests, re-size footprints
  void account(double start, double seconds, int decodes, int64_t prefill_tokens, int preempted);  // totals, record
  StepCosts& costs_;
  EngineConfig cfg_;
  int replica_ = 0;
  double now_ = 0;
  std::deque<Seq> waiting_;    // FIFO; preempted requests go back to the front
  std::vector<Seq> running_;   // admission order (preemption takes the last)
  std::vector<RequestResult> results_;
  std::vector<IterationRecord> records_;
  EngineTotals totals_;
  double hbm_used_ = 0, dram_used_ = 0;
  int64_t finished_ = 0;
  double pending_transfer_s_ = 0;  // swap-out time charged to the next iteration
  struct Chunk {
    size_t seq;      // index into running_
    int64_t tokens;
  };
  std::vector<Chunk> chunks_;  // this iteration's prefill chunks (reused: step() is the hot path)
};

}  // namespace kvsim::serve
