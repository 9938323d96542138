// CUDA's function and variable qualifiers under the emulator. Every function runs on the host, so the
// execution-space qualifiers vanish; __shared__ becomes per-OS-thread static storage, which is per block
// because one OS thread runs one block at a time to completion (block_runner.cpp). Dynamic shared memory
// (`extern __shared__ T x[];`) cannot be spelled this way in C++ — `extern static` is a compile error —
// so kernels declare it with KVSIM_DYNAMIC_SHARED (kernels/cuda_launch.cuh).
#pragma once

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local
// Device-wide constants would need cudaMemcpyToSymbol, which the emulator does not provide.
#define __constant__ static_assert(false, "kvsim CUDA emulator: __constant__ memory is not supported");
