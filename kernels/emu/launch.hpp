// A kernel launch under the emulator: KVSIM_EMU_LAUNCH(kernel, grid, block[, smem[, stream]])(args...)
// is what KVSIM_LAUNCH (kernels/cuda_launch.cuh) becomes where nvcc would write
// kernel<<<grid, block, smem, stream>>>(args...). The arguments are copied once into the launch, and
// every GPU thread calls the kernel with its own copy of them (a kernel may modify its parameters, as on
// the GPU). The kernel is named inside a generic lambda, so templates deduce their arguments as at a
// <<<...>>> call site. Enforced at compile time: the kernel returns void, and the arguments are
// trivially copyable (a GPU receives them as bytes). At run time: a pointer argument that is neither
// null nor inside memory from cudaMalloc / cudaMallocHost is an error (on a GPU, an illegal address).
#pragma once
#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/emu/block_runner.hpp"
#include "kernels/emu/device_memory.hpp"
#include "kernels/emu/error.hpp"
#include "kernels/emu/thread_context.hpp"

namespace kvsim::emu {

template <class Call>  // a captureless lambda calling the kernel with its arguments
class Launch {
 public:
  // A template kernel with several arguments is launched as KVSIM_LAUNCH((k<A, B>), ...) (the comma would
  // split the macro argument); its name is reported without the parentheses.
  Launch(const char* kernel, LaunchConfig cfg, Call) : name_(kernel), cfg_(cfg) {
    if (name_.size() >= 2 && name_.front() == '(' && name_.back() == ')') name_ = name_.substr(1, name_.size() - 2);
    kernel_ = name_.c_str();
  }

  template <class... A>
  void operator()(A&&... a) const {
    static_assert((std::is_trivially_copyable_v<std::decay_t<A>> && ...),
                  "kvsim CUDA emulator: kernel arguments must be trivially copyable (a GPU receives them as bytes)");
    using Bound = std::tuple<std::decay_t<A>...>;
    const Bound bound(std::forward<A>(a)...);
    check_pointers(bound, std::index_sequence_for<A...>{});
    run_grid(kernel_, cfg_, &call<Bound>, &bound);
  }

 private:
  template <class Bound>
  static void call(const void* bound) {
    std::apply(Call{}, *static_cast<const Bound*>(bound));  // by value: each thread its own copy
  }

  template <class Bound, size_t... I>
  void check_pointers(const Bound& bound, std::index_sequence<I...>) const {
    (check_pointer(std::get<I>(bound), I), ...);
  }
  template <class T>
  void check_pointer(const T& v, size_t index) const {
    if constexpr (std::is_pointer_v<T>) {
      if (v != nullptr && !accessible_from_device(v, 0))
        throw Error("kernel '" + std::string(kernel_) + "': argument " + std::to_string(index) +
                    " points to host memory that is not from cudaMalloc or cudaMallocHost (an illegal address "
                    "on a GPU)");
    }
  }

  std::string name_;
  const char* kernel_ = nullptr;
  LaunchConfig cfg_;
};

// The launch's dynamic shared memory, as the given type (KVSIM_DYNAMIC_SHARED); null when the launch
// asked for none. Filled with 0xff bytes at the start of every block, so a read before a write shows.
template <class T>
T* dynamic_shared() {
  static_assert(alignof(T) <= 16, "kvsim CUDA emulator: dynamic shared memory is 16-byte aligned");
  return reinterpret_cast<T*>(tls_thread.dynamic_smem);
}

}  // namespace kvsim::emu

#define KVSIM_EMU_LAUNCH(kernel, ...)                                                                  \
  ::kvsim::emu::Launch(#kernel, ::kvsim::emu::LaunchConfig(__VA_ARGS__), [](auto... kvsim_emu_arg) {  \
    static_assert(std::is_void_v<decltype(kernel(kvsim_emu_arg...))>, "a CUDA kernel returns void");  \
    kernel(kvsim_emu_arg...);                                                                          \
  })
