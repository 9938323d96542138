// The CUDA benchmarks (bench_cuda.cpp): registered on demand by `kvsim bench`, and only where a GPU is
// present, so no other command initializes the CUDA runtime.
#pragma once

namespace kvsim::bench {
void register_cuda_benchmarks();
}
