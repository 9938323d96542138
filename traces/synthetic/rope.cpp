#include "traces/synthetic/rope.hpp"

#include <cmath>

namespace kvsim {

double rope_frequency(int pair, int head_dim, double theta) {
  return std::pow(theta, -2.0 * pair / head_dim);
}

void rope_rotate(float* x, int d, int64_t pos, double theta) {
  const int n = d / 2;
  for (int i = 0; i < n; ++i) {
    const double a = double(pos) * rope_frequency(i, d, theta);
    const double c = std::cos(a), s = std::sin(a);
    const double x0 = x[i], x1 = x[i + n];
    x[i] = float(x0 * c - x1 * s);
    x[i + n] = float(x0 * s + x1 * c);
  }
}

RopeTable::RopeTable(int head_dim, double theta) : d_(head_dim), pairs_(head_dim / 2) {
  freq_.resize(size_t(pairs_));
  for (int i = 0; i < pairs_; ++i) freq_[size_t(i)] = rope_frequency(i, d_, theta);
  step_.resize(size_t(kBlock) * pairs_ * 2);
  for (int m = 0; m < kBlock; ++m)
    for (int i = 0; i < pairs_; ++i) {
      const double a = m * freq_[size_t(i)];
      step_[(size_t(m) * pairs_ + i) * 2] = std::cos(a);
      step_[(size_t(m) * pairs_ + i) * 2 + 1] = std::sin(a);
    }
}

void RopeTable::angles(int64_t p0, int64_t p1, float* cs) const {
  const size_t n = size_t(pairs_);
  std::vector<double> anchor(2 * n);
  int64_t anchor_pos = -1;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t a = p - (p % kBlock);
    if (a != anchor_pos) {  // exact angles at the block's first position
      anchor_pos = a;
      for (size_t i = 0; i < n; ++i) {
        const double ang = double(a) * freq_[i];
        anchor[2 * i] = std::cos(ang);
        anchor[2 * i + 1] = std::sin(ang);
      }
    }
    const double* st = &step_[size_t(p - a) * n * 2];
    float* row = cs + size_t(p - p0) * 2 * n;
    for (size_t i = 0; i < n; ++i) {  // (ca + i sa)(cm + i sm)
      const double ca = anchor[2 * i], sa = anchor[2 * i + 1], cm = st[2 * i], sm = st[2 * i + 1];
      row[i] = float(ca * cm - sa * sm);
      row[n + i] = float(sa * cm + ca * sm);
    }
  }
}

void RopeTable::rotate_rows(float* x, int64_t rows, const float* cs) const {
  const int n = pairs_;
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + size_t(r) * d_;
    const float* c = cs + size_t(r) * 2 * n;
    const float* s = c + n;
    for (int i = 0; i < n; ++i) {
      const float x0 = v[i], x1 = v[i + n];
      v[i] = x0 * c[i] - x1 * s[i];
      v[i + n] = x0 * s[i] + x1 * c[i];
    }
  }
}

}  // namespace kvsim
