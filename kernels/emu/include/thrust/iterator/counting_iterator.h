#pragma once
#include <cstddef>
#include <iterator>

namespace thrust {
// The sequence first, first + 1, ... as a random-access iterator that stores only its current value.
template <class T>
class counting_iterator {
 public:
  using iterator_category = std::random_access_iterator_tag;
  using value_type = T;
  using difference_type = std::ptrdiff_t;
  using pointer = const T*;
  using reference = T;

  counting_iterator() = default;
  explicit counting_iterator(T v) : v_(v) {}
  T operator*() const { return v_; }
  T operator[](difference_type n) const { return T(v_ + n); }
  counting_iterator& operator++() { return ++v_, *this; }
  counting_iterator operator++(int) { return counting_iterator(v_++); }
  counting_iterator& operator--() { return --v_, *this; }
  counting_iterator& operator+=(difference_type n) { return v_ = T(v_ + n), *this; }
  counting_iterator& operator-=(difference_type n) { return v_ = T(v_ - n), *this; }
  friend counting_iterator operator+(counting_iterator it, difference_type n) { return it += n; }
  friend counting_iterator operator-(counting_iterator it, difference_type n) { return it -= n; }
  friend difference_type operator-(counting_iterator a, counting_iterator b) {
    return difference_type(a.v_) - difference_type(b.v_);
  }
  friend bool operator==(counting_iterator a, counting_iterator b) { return a.v_ == b.v_; }
  friend auto operator<=>(counting_iterator a, counting_iterator b) { return a.v_ <=> b.v_; }

 private:
  T v_{};
};
}  // namespace thrust
