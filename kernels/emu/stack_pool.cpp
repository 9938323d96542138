#include "kernels/emu/stack_pool.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <new>
#include <vector>

namespace kvsim::emu {
namespace {
// Enough for a 1024-thread block plus slack; beyond this, released stacks are unmapped.
constexpr size_t kMaxPooled = 2048;

size_t page_bytes() {
  static const size_t p = size_t(sysconf(_SC_PAGESIZE));
  return p;
}
size_t mapping_bytes() { return PooledStack::kUsableBytes + page_bytes(); }

// The bases of free mappings. Per OS thread: a fiber is created, run and destroyed on one OS thread.
struct Pool {
  std::vector<void*> free;
  ~Pool() {
    for (void* base : free) munmap(base, mapping_bytes());
  }
};
thread_local Pool pool;
}  // namespace

boost::context::stack_context PooledStack::allocate() {
  void* base = nullptr;
  if (!pool.free.empty()) {
    base = pool.free.back();
    pool.free.pop_back();
  } else {
    base = mmap(nullptr, mapping_bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) throw std::bad_alloc();
    if (mprotect(base, page_bytes(), PROT_NONE) != 0) {  // the guard page: stacks grow down into it
      munmap(base, mapping_bytes());
      throw std::bad_alloc();
    }
  }
  boost::context::stack_context sctx;
  sctx.size = kUsableBytes;
  sctx.sp = static_cast<char*>(base) + mapping_bytes();  // the top: x86-64 and AArch64 stacks grow down
  if (record_) *record_ = sctx;
  return sctx;
}

void PooledStack::deallocate(boost::context::stack_context& sctx) noexcept {
  void* base = static_cast<char*>(sctx.sp) - mapping_bytes();
  if (pool.free.size() < kMaxPooled) {
    try {
      pool.free.push_back(base);
      return;
    } catch (...) {
    }
  }
  munmap(base, mapping_bytes());
}

}  // namespace kvsim::emu
