// The exception the CUDA emulator throws when a kernel does something it cannot emulate faithfully or
// that is undefined on a GPU (a barrier not reached by every thread, a warp collective whose lanes do
// not meet, a launch from inside a kernel, ...). It derives from std::runtime_error, like the launchers'
// own CUDA errors, so callers handle both the same way.
#pragma once
#include <stdexcept>
#include <string>

namespace kvsim::emu {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error("kvsim CUDA emulator: " + what) {}
};

}  // namespace kvsim::emu
