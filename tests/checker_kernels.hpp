// Small kernels with faults planted on request, for the CUDA emulator's access checker
// (tests/test_emu_checker.cpp); tests/checker_kernels.cu runs them through the emulator only. Each
// launcher runs its kernel once: with `fault` false it is correct and must pass the checker, with it
// true the checker must throw kvsim::emu::Error naming the fault. The faulty line of each kernel carries
// a "// planted: <tag>" comment, which the test looks up to know the line the report must quote.
#pragma once
#include <vector>

namespace kvsim::test::checker_kernels {

// Each thread writes its slot of a static __shared__ array and reads another warp's (no __syncthreads).
std::vector<int> neighbour_exchange(bool fault);
// Lanes of one warp exchange through shared memory (lane l reads lane l ^ 1's value), ordered by:
enum class WarpOrder {
  syncwarp,       // __syncwarp() over the whole warp: correct
  shuffle,        // a __shfl_xor_sync over the whole warp (a warp-synchronous point too): correct
  none,           // nothing: a race
  split_masks,    // __syncwarp with the even lanes' mask on even lanes, the odd lanes' on odd ones: each
                  // lane meets only lanes of its own parity, never its partner: a race
};
std::vector<int> warp_exchange(WarpOrder order);
// Threads write one shared counter without atomics, in the same barrier interval.
std::vector<int> shared_counter(bool fault);
// out[i] = in[i + 1] for every i < n: the last thread reads past the allocation.
std::vector<float> shift_copy(bool fault);
// A static __shared__ index runs past its array.
std::vector<float> static_shared_overrun(bool fault);
// A dynamic shared memory index runs past the launch's bytes.
std::vector<float> dynamic_shared_overrun(bool fault);
// Sums a device buffer of which the host copied all but the last element.
float sum_partly_copied(bool fault);
// Scales through a Params struct whose input pointer is host memory.
std::vector<float> scale_through_params(bool fault);
// The "last block sums the partials" pattern: mode 0 correct (__threadfence + atomicInc), 1 without the
// fence, 2 without the atomic (the block with the highest index assumes it runs last).
float last_block_sum(int mode);

// Traffic (kernels/emu/counters.hpp), 64 threads = 2 warps over 64 floats: a coalesced copy, a stride-2
// read (out[i] = in[2i]), a broadcast read (out[i] = in[0]), and 64 atomicAdds to one counter.
void coalesced_copy();
void stride2_read();
void broadcast_read();
void one_counter_atomics();
// Two blocks of 64 threads with a known chain: 7 global steps, 1 shared step, 1 barrier (chain_kernel).
void chain_of_loads();

}  // namespace kvsim::test::checker_kernels
