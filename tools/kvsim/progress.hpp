// A one-line progress bar on standard error for long work (writing a large trace, a sweep). It draws
// only when standard error is a terminal, so logs and pipes stay clean, and redraws at most ten times
// a second so it costs nothing measurable.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace kvsim {

class Progress {
 public:
  explicit Progress(std::string label, bool enabled = ::isatty(STDERR_FILENO) != 0)
      : label_(std::move(label)), enabled_(enabled), start_(std::chrono::steady_clock::now()) {}
  ~Progress() { finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // fraction in [0, 1].
  void update(double fraction) {
    if (!enabled_ || done_) return;
    const auto now = std::chrono::steady_clock::now();
    if (drawn_ && now - last_ < std::chrono::milliseconds(100) && fraction < 1.0) return;
    last_ = now;
    drawn_ = true;
    const int width = 30, filled = int(fraction * width + 0.5);
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double eta = fraction > 0.01 ? elapsed * (1 - fraction) / fraction : 0;
    std::fprintf(stderr, "\r%s [%.*s%*s] %5.1f%%  %.0fs elapsed, ~%.0fs left ", label_.c_str(), filled,
                 "==============================", width - filled, "", 100 * fraction, elapsed, eta);
    std::fflush(stderr);
  }
  void finish() {
    if (enabled_ && drawn_ && !done_) std::fprintf(stderr, "\n");
    done_ = true;
  }

 private:
  std::string label_;
  bool enabled_, drawn_ = false, done_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace kvsim
