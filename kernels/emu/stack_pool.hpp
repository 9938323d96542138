// Stacks for the emulated GPU threads' fibers: small (64 KiB: kernels keep their data in registers,
// shared memory and global memory, not in deep call chains), with an inaccessible guard page below each
// so that an overflow faults at once instead of corrupting a neighbour, and kept in a per-OS-thread pool
// so that a launch reuses the stacks of the previous one instead of mapping fresh memory per block.
// Satisfies Boost.Context's StackAllocator concept (allocate / deallocate of a stack_context).
#pragma once
#include <boost/context/stack_context.hpp>
#include <cstddef>

namespace kvsim::emu {

class PooledStack {
 public:
  static constexpr size_t kUsableBytes = 64 * 1024;
  // `record`, when given, receives each allocated stack (its owner's view, e.g. for AddressSanitizer).
  explicit PooledStack(boost::context::stack_context* record = nullptr) : record_(record) {}
  boost::context::stack_context allocate();               // throws std::bad_alloc when mapping fails
  void deallocate(boost::context::stack_context& sctx) noexcept;

 private:
  boost::context::stack_context* record_;
};

}  // namespace kvsim::emu
