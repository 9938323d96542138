#include "kernels/emu/block_runner.hpp"
#include "kernels/emu/checker.hpp"
#include "kernels/emu/counters.hpp"

#include <atomic>
#include <boost/context/fiber.hpp>
#include <cstring>
#include <exception>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/emu/error.hpp"
#include "kernels/emu/stack_pool.hpp"
#include "kernels/emu/thread_context.hpp"

// AddressSanitizer must be told about every switch between stacks, or it reports false stack errors
// when a fiber throws (make test-asan); without ASan these compile to nothing.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define KVSIM_EMU_ASAN 1
#endif

namespace kvsim::emu {

namespace ctx = boost::context;

namespace {
// Before leaving the current stack for [bottom, bottom + size); fake_stack null when leaving it for good.
inline void leaving_stack([[maybe_unused]] void** fake_stack, [[maybe_unused]] const void* bottom,
                          [[maybe_unused]] size_t size) {
#if defined(KVSIM_EMU_ASAN)
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
#endif
}
// First thing on the stack switched to; reports the bounds of the stack left when asked.
inline void arrived_on_stack([[maybe_unused]] void* fake_stack, [[maybe_unused]] const void** from_bottom,
                             [[maybe_unused]] size_t* from_size) {
#if defined(KVSIM_EMU_ASAN)
  __sanitizer_finish_switch_fiber(fake_stack, from_bottom, from_size);
#endif
}
// Thrown at a waiting thread's suspension point when its launch is abandoned after an error, so its
// stack unwinds (destructors run) and its fiber returns normally.
struct Abandon {};
}  // namespace

enum class LaneState : uint8_t { running, at_barrier, at_warp_op, exited };

// One emulated GPU thread: its place in the block, its fiber, and what it waits for.
struct Lane {
  uint3 idx{0, 0, 0};
  unsigned linear = 0;  // x + y·Dx + z·Dx·Dy: warp linear / 32, lane linear % 32 (CUDA's numbering)
  unsigned block_threads = 0;
  LaneState state = LaneState::exited;
  std::source_location site;  // where it waits
  // The warp collective it waits in.
  WarpOp op = WarpOp::sync;
  unsigned mask = 0;
  int arg = 0, width = 32;
  uint64_t in = 0, out = 0;
  ctx::fiber fiber;  // this thread, suspended (empty while it runs)
  ctx::fiber back;   // the block runner, while this thread runs
  ctx::stack_context stack;  // this thread's stack (for AddressSanitizer's bookkeeping)
  void* fake_stack = nullptr;
  // The stack of the block runner that resumed it, and whether the launch is being abandoned.
  const void* runner_stack_bottom = nullptr;
  size_t runner_stack_size = 0;
  const bool* abandoning = nullptr;
};

namespace {

const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::sync: return "__syncwarp";
    case WarpOp::shfl_idx: return "__shfl_sync";
    case WarpOp::shfl_up: return "__shfl_up_sync";
    case WarpOp::shfl_down: return "__shfl_down_sync";
    case WarpOp::shfl_xor: return "__shfl_xor_sync";
    case WarpOp::ballot: return "__ballot_sync";
    case WarpOp::any: return "__any_sync";
    case WarpOp::all: return "__all_sync";
    case WarpOp::activemask: return "__activemask";
  }
  return "?";
}

std::string where(const std::source_location& s) {
  const char* f = s.file_name();
  const char* slash = std::strrchr(f, '/');
  std::ostringstream o;  // file:line:column: two barriers on one line are still told apart
  o << (slash ? slash + 1 : f) << ":" << s.line() << ":" << s.column();
  return o.str();
}

bool same_site(const std::source_location& a, const std::source_location& b) {
  // One translation unit's file names are usually one string: compare pointers before characters.
  return a.line() == b.line() && a.column() == b.column() &&
         (a.file_name() == b.file_name() || std::strcmp(a.file_name(), b.file_name()) == 0);
}

std::string coords(uint3 v) {
  std::ostringstream o;
  o << "(" << v.x << "," << v.y << "," << v.z << ")";
  return o.str();
}

std::string hex(unsigned v) {
  std::ostringstream o;
  o << "0x" << std::hex << v;
  return o.str();
}

// The source lane of a shuffle, as the hardware computes it (PTX shfl.sync: a segment of `width` lanes;
// outside it, or past its edge for up / down / xor, a lane reads its own value).
unsigned shuffle_source(WarpOp op, unsigned lane, int arg, int width) {
  const unsigned segmask = unsigned(32 - width) & 31u;  // the lane bits that name the segment
  const unsigned b = unsigned(arg) & 31u;
  const unsigned min_lane = lane & segmask;
  const unsigned max_lane = op == WarpOp::shfl_up ? min_lane : (min_lane | (31u & ~segmask));
  int j = int(lane);
  bool inside = true;
  switch (op) {
    case WarpOp::shfl_idx: j = int(min_lane | (b & ~segmask)); break;
    case WarpOp::shfl_up: j = int(lane) - int(b), inside = j >= int(max_lane); break;
    case WarpOp::shfl_down: j = int(lane + b), inside = j <= int(max_lane); break;
    case WarpOp::shfl_xor: j = int(lane ^ b), inside = j <= int(max_lane); break;
    default: break;
  }
  return inside ? unsigned(j) : lane;
}

class BlockRunner {
 public:
  BlockRunner(const char* kernel, const LaunchConfig& cfg, KernelEntry entry, const void* bound)
      : kernel_(kernel), cfg_(cfg), entry_(entry), bound_(bound) {
    const unsigned n = cfg.block.x * cfg.block.y * cfg.block.z;
    lanes_ = std::make_unique<Lane[]>(n);
    n_ = n;
    for (unsigned i = 0; i < n; ++i) {
      Lane& l = lanes_[i];
      l.linear = i;
      l.block_threads = n;
      l.idx = {i % cfg.block.x, (i / cfg.block.x) % cfg.block.y, i / (cfg.block.x * cfg.block.y)};
    }
    // Dynamic shared memory with a red zone on each side, so that the access checker can tell an index
    // running past either end from an unrelated address.
    if (cfg.shared_bytes > 0)
      smem_ = std::make_unique<Aligned[]>((2 * kRedzone + cfg.shared_bytes + sizeof(Aligned) - 1) / sizeof(Aligned));
    ThreadContext& t = tls_thread;
    t.block_dim = cfg.block;
    t.grid_dim = cfg.grid;
    t.dynamic_smem = smem_ ? reinterpret_cast<unsigned char*>(smem_.get()) + kRedzone : nullptr;
    t.dynamic_smem_bytes = cfg.shared_bytes;
    for (unsigned i = 0; i < n; ++i) {
      lanes_[i].abandoning = &abandoning_;
      lanes_[i].fiber = make_fiber(lanes_[i]);
    }
  }

  // After an error some threads are suspended mid-kernel: resume each one so that it unwinds its own
  // stack and returns (run_grid calls this before rethrowing).
  void abandon() noexcept {
    abandoning_ = true;
    for (unsigned i = 0; i < n_; ++i) {
      Lane& l = lanes_[i];
      if (l.fiber) switch_to(l);
    }
  }

  ~BlockRunner() {
    lanes_.reset();
    tls_thread = ThreadContext{};
  }

  void run() {
    checker::launch_begin(kernel_, cfg_.grid, cfg_.block, tls_thread.dynamic_smem, cfg_.shared_bytes, kRedzone);
    const dim3 g = cfg_.grid;
    for (unsigned z = 0; z < g.z; ++z)
      for (unsigned y = 0; y < g.y; ++y)
        for (unsigned x = 0; x < g.x; ++x) run_block({x, y, z});
    // Let every fiber leave its loop and return, so its stack goes back to the pool without unwinding.
    finished_ = true;
    for (unsigned i = 0; i < n_; ++i) resume(lanes_[i]);
  }

 private:
  struct alignas(16) Aligned {
    unsigned char b[16];
  };
  static constexpr size_t kRedzone = 1024;

  ctx::fiber make_fiber(Lane& me) {
    return ctx::fiber(std::allocator_arg, PooledStack(&me.stack), [this, &me](ctx::fiber&& back) {
      arrived_on_stack(nullptr, &me.runner_stack_bottom, &me.runner_stack_size);
      me.back = std::move(back);
      while (!finished_ && !abandoning_) {
        try {
          entry_(bound_);
        } catch (const Abandon&) {
          break;
        } catch (const ctx::detail::forced_unwind&) {
          throw;  // Boost.Context unwinding this stack: must reach the fiber's entry
        } catch (...) {
          if (!error_) error_ = std::current_exception();
        }
        me.state = LaneState::exited;
        leaving_stack(&me.fake_stack, me.runner_stack_bottom, me.runner_stack_size);
        me.back = std::move(me.back).resume();  // until the next block (or the end)
        arrived_on_stack(me.fake_stack, nullptr, nullptr);
      }
      leaving_stack(nullptr, me.runner_stack_bottom, me.runner_stack_size);
      return std::move(me.back);
    });
  }

  // Runs thread l until it waits, finishes its block, or returns.
  void switch_to(Lane& l) {
    tls_thread.thread_idx = l.idx;
    tls_thread.lane = &l;
    tls_thread.linear = l.linear;
    tls_thread.stack_hi = reinterpret_cast<uintptr_t>(l.stack.sp);
    tls_thread.stack_lo = tls_thread.stack_hi - l.stack.size;
    leaving_stack(&fake_stack_, static_cast<char*>(l.stack.sp) - l.stack.size, l.stack.size);
    l.fiber = std::move(l.fiber).resume();
    arrived_on_stack(fake_stack_, nullptr, nullptr);
    tls_thread.lane = nullptr;
  }

  void resume(Lane& l) {
    switch_to(l);
    if (error_) std::rethrow_exception(error_);
  }

  void run_block(uint3 b) {
    tls_thread.block_idx = b;
    checker::block_begin(b);
    // Fresh shared memory holds garbage on a GPU; NaN / -1 bytes make a read before any write visible.
    // (The checker poisons static __shared__ arrays the same way, at their first access in a block.)
    if (smem_) std::memset(tls_thread.dynamic_smem, 0xff, cfg_.shared_bytes);
    for (unsigned i = 0; i < n_; ++i) lanes_[i].state = LaneState::running;
    bool forward = true;
    for (;;) {
      for (unsigned k = 0; k < n_; ++k) {
        Lane& l = lanes_[forward ? k : n_ - 1 - k];
        if (l.state == LaneState::running) resume(l);
      }
      forward = !forward;
      unsigned exited = 0, at_barrier = 0;
      for (unsigned i = 0; i < n_; ++i) {
        exited += lanes_[i].state == LaneState::exited;
        at_barrier += lanes_[i].state == LaneState::at_barrier;
      }
      if (exited == n_) return;
      if (release_warp_collectives()) continue;
      if (at_barrier == n_) {
        release_barrier(b);
        continue;
      }
      stuck(b);
    }
  }

  void release_barrier(uint3 b) {
    for (unsigned i = 1; i < n_; ++i)
      if (!same_site(lanes_[i].site, lanes_[0].site))
        throw Error("kernel '" + std::string(kernel_) + "', block " + coords(b) + ": thread " +
                    coords(lanes_[0].idx) + " waits at __syncthreads (" + where(lanes_[0].site) + ") but thread " +
                    coords(lanes_[i].idx) + " at another one (" + where(lanes_[i].site) +
                    "): a barrier in divergent code is undefined on a GPU");
    for (unsigned i = 0; i < n_; ++i) lanes_[i].state = LaneState::running;
    checker::barrier_released();
  }

  // Releases every warp collective whose lanes have all arrived; false when there was none.
  bool release_warp_collectives() {
    bool released = false;
    for (unsigned w0 = 0; w0 < n_; w0 += 32) {
      const unsigned count = n_ - w0 < 32 ? n_ - w0 : 32;
      unsigned live = 0;  // lanes of this warp that have not exited
      for (unsigned j = 0; j < count; ++j) live |= unsigned(lanes_[w0 + j].state != LaneState::exited) << j;
      unsigned done = 0;
      for (unsigned j = 0; j < count; ++j) {
        const Lane& l = lanes_[w0 + j];
        if (l.state != LaneState::at_warp_op || (done >> j & 1u)) continue;
        const unsigned group = l.op == WarpOp::activemask ? live : l.mask;
        if (!group_waits(w0, group, l)) continue;
        exchange(w0, group, l.op, l.width);
        checker::warp_synced(w0, group);
        for (unsigned k = 0; k < 32; ++k)
          if (group >> k & 1u) lanes_[w0 + k].state = LaneState::running;
        done |= group;
        released = true;
      }
    }
    return released;
  }

  // Whether every lane of `group` waits in the same collective as `first` (same op, mask and width;
  // __activemask also at the same call site, since its result is "who is here").
  bool group_waits(unsigned w0, unsigned group, const Lane& first) const {
    for (unsigned k = 0; k < 32; ++k) {
      if (!(group >> k & 1u)) continue;
      if (w0 + k >= n_) return false;
      const Lane& o = lanes_[w0 + k];
      if (o.state != LaneState::at_warp_op || o.op != first.op || o.width != first.width) return false;
      if (first.op == WarpOp::activemask ? !same_site(o.site, first.site) : o.mask != first.mask) return false;
    }
    return true;
  }

  void exchange(unsigned w0, unsigned group, WarpOp op, int width) {
    unsigned votes = 0;
    for (unsigned k = 0; k < 32; ++k)
      if ((group >> k & 1u) && lanes_[w0 + k].in != 0) votes |= 1u << k;
    for (unsigned k = 0; k < 32; ++k) {
      if (!(group >> k & 1u)) continue;
      Lane& l = lanes_[w0 + k];
      switch (op) {
        case WarpOp::sync: l.out = 0; break;
        case WarpOp::ballot: l.out = votes; break;
        case WarpOp::any: l.out = votes != 0; break;
        case WarpOp::all: l.out = votes == group; break;
        case WarpOp::activemask: l.out = group; break;
        case WarpOp::shfl_idx:
        case WarpOp::shfl_up:
        case WarpOp::shfl_down:
        case WarpOp::shfl_xor: {
          const unsigned src = shuffle_source(op, k, l.arg, width);
          if (!(group >> src & 1u))
            throw Error("kernel '" + std::string(kernel_) + "': " + op_name(op) + " (" + where(l.site) + ") in lane " +
                        std::to_string(k) + " of warp " + std::to_string(w0 / 32) + " reads lane " +
                        std::to_string(src) + ", which is not in the mask " + hex(group) +
                        " (its value is undefined on a GPU)");
          l.out = lanes_[w0 + src].in;
          break;
        }
      }
    }
  }

  [[noreturn]] void stuck(uint3 b) const {
    std::ostringstream o;
    o << "kernel '" << kernel_ << "', block " << coords(b) << " cannot make progress (it would hang on a GPU):";
    unsigned exited = 0, at_barrier = 0;
    const Lane* barrier_lane = nullptr;
    for (unsigned i = 0; i < n_; ++i) {
      const Lane& l = lanes_[i];
      if (l.state == LaneState::exited) ++exited;
      if (l.state == LaneState::at_barrier && !barrier_lane) barrier_lane = &l;
      at_barrier += l.state == LaneState::at_barrier;
    }
    if (at_barrier)
      o << " " << at_barrier << " of " << n_ << " threads wait at __syncthreads (" << where(barrier_lane->site)
        << ", first thread " << coords(barrier_lane->idx) << ")";
    if (exited) o << (at_barrier ? "," : "") << " " << exited << " have exited";
    unsigned listed = 0, at_warp = 0;
    for (unsigned i = 0; i < n_; ++i) {
      const Lane& l = lanes_[i];
      if (l.state != LaneState::at_warp_op) continue;
      if (listed++ < 4)
        o << "; thread " << coords(l.idx) << " (warp " << l.linear / 32 << ", lane " << l.linear % 32 << ") waits in "
          << op_name(l.op) << (l.op == WarpOp::activemask ? "" : " with mask " + hex(l.mask)) << " ("
          << where(l.site) << ")";
      ++at_warp;
    }
    if (at_warp > listed) o << "; " << at_warp - listed << " more threads wait in warp collectives";
    o << ". Every thread of a block must reach the same __syncthreads, and every lane named in a warp "
         "collective's mask must make the same call.";
    throw Error(o.str());
  }

  const char* kernel_;
  LaunchConfig cfg_;
  KernelEntry entry_;
  const void* bound_;
  unsigned n_ = 0;
  std::unique_ptr<Aligned[]> smem_;
  std::unique_ptr<Lane[]> lanes_;  // after smem_: destroyed (stacks unwound) first
  std::exception_ptr error_;
  bool finished_ = false;
  bool abandoning_ = false;
  void* fake_stack_ = nullptr;  // the block runner's, while a fiber runs (AddressSanitizer)
};

bool valid_config(const LaunchConfig& c) {
  const dim3 g = c.grid, b = c.block;
  if (g.x == 0 || g.y == 0 || g.z == 0 || b.x == 0 || b.y == 0 || b.z == 0) return false;
  if (g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535) return false;
  if (b.x > 1024 || b.y > 1024 || b.z > 64) return false;
  if (uint64_t(b.x) * b.y * b.z > kMaxThreadsPerBlock) return false;
  return c.shared_bytes <= kMaxDynamicSharedBytes;
}

Lane& calling_lane(const char* what) {
  Lane* l = tls_thread.lane;
  if (!l) throw Error(std::string(what) + " called outside a kernel");
  return *l;
}

// From a thread waiting at a barrier or collective back to the block runner, until released.
void suspend(Lane& me) {
  leaving_stack(&me.fake_stack, me.runner_stack_bottom, me.runner_stack_size);
  me.back = std::move(me.back).resume();
  arrived_on_stack(me.fake_stack, nullptr, nullptr);
  if (*me.abandoning) throw Abandon{};
}

}  // namespace

void run_grid(const char* kernel, const LaunchConfig& cfg, KernelEntry entry, const void* bound) {
  if (tls_thread.lane)
    throw Error(std::string("kernel '") + kernel +
                "' launched from inside a kernel: dynamic parallelism is not supported");
  if (!valid_stream(cfg.stream)) {
    record_error(cudaErrorInvalidResourceHandle);
    return;
  }
  if (!valid_config(cfg)) {
    record_error(cudaErrorInvalidConfiguration);
    return;
  }
  BlockRunner runner(kernel, cfg, entry, bound);
  try {
    runner.run();
  } catch (...) {
    checker::launch_abandoned();
    runner.abandon();
    throw;
  }
  LaunchCounts c;
  const bool counting = CountSink::active();
  const std::string findings = checker::launch_end(counting ? &c : nullptr);  // fills the traffic
  if (counting) {
    c.kernel = kernel;
    c.grid = cfg.grid;
    c.block = cfg.block;
    c.dynamic_shared_bytes = cfg.shared_bytes;
    CountSink::launch(c);
  }
  if (!findings.empty()) throw Error(findings);
}

namespace {
// The skipped call site: a suffix of its file name, and its line (0: none). The line is atomic so that
// launches on other host threads may test it while a test sets it; the file is written before the line.
std::string skipped_file;
std::atomic<unsigned> skipped_line{0};
}  // namespace

void skip_barrier_at(const std::string& file_suffix, unsigned line) {
  skipped_line.store(0);
  skipped_file = file_suffix;
  skipped_line.store(line);
}

void block_barrier(const std::source_location& site) {
  if (const unsigned skip = skipped_line.load(std::memory_order_relaxed); skip != 0 && site.line() == skip) {
    const std::string_view f = site.file_name(), want = skipped_file;
    if (f.size() >= want.size() && f.substr(f.size() - want.size()) == want) return;  // as if the line were gone
  }
  Lane& me = calling_lane("__syncthreads");
  me.state = LaneState::at_barrier;
  me.site = site;
  suspend(me);
}

uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width,
                         const std::source_location& site) {
  Lane& me = calling_lane(op_name(op));
  const unsigned lane = me.linear % 32, w0 = me.linear - lane;
  const unsigned count = me.block_threads - w0 < 32 ? me.block_threads - w0 : 32;
  const unsigned exists = count == 32 ? ~0u : (1u << count) - 1;
  if (op != WarpOp::activemask) {
    if (!(mask >> lane & 1u))
      throw Error(std::string(op_name(op)) + " (" + where(site) + "): lane " + std::to_string(lane) +
                  " calls it with mask " + hex(mask) + ", which does not include itself");
    if (mask & ~exists)
      throw Error(std::string(op_name(op)) + " (" + where(site) + "): mask " + hex(mask) + " names lanes beyond the " +
                  std::to_string(count) + " threads of this warp (the block has " + std::to_string(me.block_threads) +
                  " threads)");
  }
  if (width < 1 || width > 32 || (width & (width - 1)) != 0)
    throw Error(std::string(op_name(op)) + " (" + where(site) + "): width " + std::to_string(width) +
                " is not a power of two in [1, 32]");
  me.state = LaneState::at_warp_op;
  me.op = op;
  me.mask = mask;
  me.in = value;
  me.arg = arg;
  me.width = width;
  me.site = site;
  suspend(me);
  return me.out;
}

}  // namespace kvsim::emu
