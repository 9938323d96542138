#include "serve/engine.hpp"

#include <algorithm>
#include <stdexcept>

namespace kvsim::serve {

const char* preemption_name(Preemption p) { return p == Preemption::swap ? "swap" : "recompute"; }

Engine::Engine(StepCosts& costs, const EngineConfig& cfg, int replica) : costs_(costs), cfg_(cfg), replica_(replica) {
  if (cfg_.token_budget < 1 || cfg_.chunk_tokens < 1) throw std::invalid_argument("engine: budget and chunk must be >= 1");
}

void Engine::submit(const Request& r) {
  if (!results_.empty() && r.arrival_s < results_.back().arrival_s)
    throw std::logic_error("engine: requests submitted out of arrival order");
  RequestResult res;
  res.id = r.id;
  res.replica = replica_;
  res.arrival_s = r.arrival_s;
  res.prompt_tokens = r.prompt_tokens;
  res.output_tokens = r.output_tokens;
  results_.push_back(res);
  Seq s;
  s.index = int64_t(results_.size()) - 1;
  s.prompt = r.prompt_tokens;
  s.output = r.output_tokens;
  s.to_prefill = r.prompt_tokens;
  s.footprint = costs_.footprint(r.prompt_tokens, r.output_tokens);
  waiting_.push_back(s);
}

void Engine::preempt_last(double& transfer_s) {
  Seq s = running_.back();
  running_.pop_back();
  hbm_used_ -= s.held.hbm;
  dram_used_ -= s.held.dram;
  ++results_[size_t(s.index)].preemptions;
  ++totals_.preemptions;
  if (cfg_.preemption == Preemption::swap && s.prefilled == s.to_prefill) {
    // The KV goes to host memory over PCIe and comes back when it is readmitted.
    s.swapped = true;
    transfer_s += s.held.hbm / costs_.deployment().machine.d2h;
    totals_.swap_bytes += s.held.hbm;
  } else {
    // Recompute: the KV is dropped; readmission prefills the prompt and the tokens generated so far.
    s.to_prefill = s.prompt + s.generated;
    s.prefilled = 0;
  }
  s.held = {};
  waiting_.push_front(s);
}

// 3. Admission from the queue, in arrival order, while memory and the batch limit allow; an admitted request
// that still has prompt to prefill gets a chunk of what is left of the token budget.
void Engine::admit(int64_t& budget, double& seconds, double hbm_cap, double dram_cap) {
  while (!waiting_.empty() && results_[size_t(waiting_.front().index)].arrival_s <= now_ &&
         (cfg_.max_running == 0 || int64_t(running_.size()) < cfg_.max_running)) {
    Seq s = waiting_.front();
    // A readmitted swap brings its KV back; anything else needs room for its prompt's KV (the prefill
    // peak) before it starts.
    const SeqMemory need = s.footprint.at(s.generated, s.output);
    if (!s.swapped && budget <= 0) break;
    // Even alone, at its full length, it would not fit.
    const bool never = s.footprint.last.hbm > hbm_cap || s.footprint.last.dram > dram_cap;
    if (never || hbm_used_ + need.hbm > hbm_cap || dram_used_ + need.dram > dram_cap) {
      if (never || running_.empty()) {
        // Nothing will ever free memory for it: it cannot be served on this deployment.
        results_[size_t(s.index)].rejected = true;
        ++totals_.rejected;
        ++finished_;
        waiting_.pop_front();
        continue;
      }
      break;
    }
    waiting_.pop_front();
    if (s.swapped) {
      seconds += need.hbm / costs_.deployment().machine.h2d;
      totals_.swap_bytes += need.hbm;
      s.swapped = false;
    }
    s.held = need;
    hbm_used_ += need.hbm;
    dram_used_ += need.dram;
    running_.push_back(s);
    if (s.prefilled < s.to_prefill) {
      const int64_t c = std::min({cfg_.chunk_tokens, s.to_prefill - s.prefilled, budget});
      chunks_.push_back({running_.size() - 1, c});
      budget -= c;
    }
  }
}

// Apply: decodes emit a token (before the chunks, which never belong to a decoding request, complete
// any prompt); a finished prompt emits its first token.
void Engine::apply_tokens() {
  for (Seq& s : running_)
    if (s.prefilled == s.to_prefill) ++s.generated;
  for (const Chunk& c : chunks_) {
    Seq& s = running_[c.seq];
    s.prefilled += c.tokens;
    if (s.prefilled == s.to_prefill) {
      ++s.generated;
      RequestResult& r = results_[size_t(s.index)];
      if (r.first_token_s < 0) r.first_token_s = now_;
    }
  }
  // Finished requests leave; the others' footprint grows with their tokens.
  size_t kept = 0;
  hbm_used_ = dram_used_ = 0;
  for (size_t i = 0; i < running_.size(); ++i) {
    Seq& s = running_[i];
    if (s.generated >= s.output) {
      results_[size_t(s.index)].finish_s = now_;
      ++finished_;
      continue;
    }
    if (s.prefilled == s.to_prefill) s.held = s.footprint.at(s.generated, s.output);
    hbm_used_ += s.held.hbm;
    dram_used_ += s.held.dram;
    if (kept != i) running_[kept] = s;  // moved down over a finished one (a self-copy costs ~100 bytes)
    ++kept;
  }
  running_.resize(kept);
}

// The iteration's share of the running totals, and its record when those are kept.
void Engine::account(double start, double seconds, int decodes, int64_t prefill_tokens, int preempted) {
  // Requests are submitted at their arrival (advance_to first), so the queue's not-yet-arrived tail is
  // empty in practice; counting from the back keeps this O(1) when an overloaded queue holds thousands.
  int waiting = int(waiting_.size());
  for (auto it = waiting_.rbegin(); it != waiting_.rend() && results_[size_t(it->index)].arrival_s > now_; ++it)
    --waiting;
  ++totals_.iterations;
  totals_.busy_s += seconds;
  totals_.in_system_area += double(running_.size() + size_t(waiting)) * seconds;
  totals_.waiting_area += double(waiting) * seconds;
  totals_.batch_area += double(running_.size()) * seconds;
  totals_.hbm_area += hbm_used_ * seconds;
  totals_.dram_area += dram_used_ * seconds;
  totals_.hbm_peak = std::max(totals_.hbm_peak, hbm_used_);
  totals_.dram_peak = std::max(totals_.dram_peak, dram_used_);
  if (cfg_.record_iterations)
    records_.push_back({start, seconds, decodes, int(chunks_.size()), prefill_tokens, int(running_.size()), waiting,
                        hbm_used_, dram_used_, preempted});
}

bool Engine::step() {
  const double start = now_;
  const bool arrived = !waiting_.empty() && results_[size_t(waiting_.front().index)].arrival_s <= now_;
  if (running_.empty() && !arrived) return false;

  int64_t budget = cfg_.token_budget;
  double seconds = pending_transfer_s_;
  pending_transfer_s_ = 0;
  // 1. Decodes: every request past its prefill generates one token.
  int decodes = 0;
  double prompt_sum = 0, gen_sum = 0;
  for (const Seq& s : running_)
    if (s.prefilled == s.to_prefill) {
      ++decodes;
      prompt_sum += double(s.prompt);
      gen_sum += double(s.generated);
    }
  budget -= decodes;
  // 2. Prefill chunks of admitted requests, in admission order, then 3. admission from the queue.
  std::vector<Chunk>& chunks = chunks_;
  chunks.clear();
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Seq& s = running_[i];
    if (s.prefilled == s.to_prefill) continue;
    const int64_t c = std::min({cfg_.chunk_tokens, s.to_prefill - s.prefilled, budget});
    chunks.push_back({i, c});
    budget -= c;
  }
  const double hbm_cap = costs_.hbm_capacity(), dram_cap = costs_.dram_capacity();
  admit(budget, seconds, hbm_cap, dram_cap);
  if (decodes == 0 && chunks.empty()) {
    // Only possible when the queue's head was rejected or a swapped request is back with nothing to do
    // this iteration: no time passes.
    return !running_.empty() || (!waiting_.empty() && results_[size_t(waiting_.front().index)].arrival_s <= now_);
  }

  // The iteration's time: the decode step of the batch, then the prefill chunks (see docs/serving.md for
  // why they are added rather than fused), and each finished prompt's policy work.
  if (decodes > 0) seconds += costs_.decode(double(decodes), prompt_sum / decodes, gen_sum / decodes);
  int64_t prefill_tokens = 0;
  for (const Chunk& c : chunks) {
    const Seq& s = running_[c.seq];
    seconds += costs_.prefill_chunk(double(s.prefilled), double(s.prefilled + c.tokens));
    if (s.prefilled + c.tokens == s.to_prefill) seconds += costs_.policy_prefill(double(s.to_prefill));
    prefill_tokens += c.tokens;
  }
  now_ += seconds;

  // Apply the tokens: decodes and completed prompts emit one each; finished requests leave.
  apply_tokens();
  // Out of memory: preempt the most recently admitted (vLLM's order) until the rest fit.
  int preempted = 0;
  while ((hbm_used_ > hbm_cap || dram_used_ > dram_cap) && running_.size() > 1) {
    preempt_last(pending_transfer_s_);
    ++preempted;
  }

  account(start, seconds, decodes, prefill_tokens, preempted);
  return true;
}

void Engine::advance_to(double t) {
  while (now_ < t) {
    if (!step()) {
      now_ = t;
      return;
    }
  }
}

void Engine::drain() {
  while (finished_ < int64_t(results_.size())) {
    if (!step()) {
      // Idle with requests still to come: jump to the next arrival.
      if (waiting_.empty()) break;
      now_ = std::max(now_, results_[size_t(waiting_.front().index)].arrival_s);
    }
  }
}

}  // namespace kvsim::serve
