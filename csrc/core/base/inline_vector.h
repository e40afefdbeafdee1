// A vector of plain values that keeps its first N in itself:
// a collective's per-rank lists (block sizes, offsets, addresses) are built
// at every call, and on one host they hold a few entries. A std::vector
// allocates for each and frees it again, some ten times a call for an
// all-to-all with split sizes, which a small collective on the host channel
// feels (about 40 ns a pair). Beyond N it moves to the heap, as a vector.
// Only what the callers use of std::vector's interface, for values that
// need no destructor and copy as their bytes (sizes, pointers, spans).
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <type_traits>

namespace ringreduce {

template <typename T, size_t N>
class InlineVector {
  static_assert(std::is_trivially_destructible_v<T> && std::is_trivially_copy_constructible_v<T>,
                "InlineVector holds plain values only");
  static_assert(N > 0, "InlineVector needs room for one value");

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  InlineVector() = default;
  InlineVector(size_t count, const T& value) { assign(count, value); }
  InlineVector(std::initializer_list<T> values) { assign(values.begin(), values.end()); }
  template <typename It, typename = decltype(*std::declval<It>())>
  InlineVector(It first, It last) {
    assign(first, last);
  }
  InlineVector(const InlineVector& other) { assign(other.begin(), other.end()); }
  InlineVector(InlineVector&& other) noexcept { take(other); }
  InlineVector& operator=(const InlineVector& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  InlineVector& operator=(InlineVector&& other) noexcept {
    if (this != &other) {
      heap_.reset();
      take(other);
    }
    return *this;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return heap_ ? capacity_ : N; }

  T* data() { return heap_ ? heap_.get() : local_; }
  const T* data() const { return heap_ ? heap_.get() : local_; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& front() { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& front() const { return data()[0]; }
  const T& back() const { return data()[size_ - 1]; }

  void reserve(size_t wanted) {
    if (wanted <= capacity()) return;
    std::unique_ptr<T[]> grown(new T[wanted]);
    std::copy_n(data(), size_, grown.get());
    heap_ = std::move(grown);
    capacity_ = wanted;
  }
  void push_back(const T& value) {
    if (size_ == capacity()) {
      const T copy = value;  // `value` may lie in this vector
      reserve(std::max<size_t>(2 * capacity(), 1));
      data()[size_++] = copy;
      return;
    }
    data()[size_++] = value;
  }
  void resize(size_t count, const T& value = T()) {
    reserve(count);
    std::fill(data() + std::min(size_, count), data() + count, value);
    size_ = count;
  }
  void clear() { size_ = 0; }
  void assign(size_t count, const T& value) {
    size_ = 0;
    resize(count, value);
  }
  template <typename It>
  void assign(It first, It last) {
    size_ = 0;
    reserve(static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) data()[size_++] = *first;
  }

  friend bool operator==(const InlineVector& a, const InlineVector& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const InlineVector& a, const InlineVector& b) { return !(a == b); }

 private:
  void take(InlineVector& other) {
    size_ = other.size_;
    capacity_ = other.capacity_;
    if (other.heap_) {
      heap_ = std::move(other.heap_);
    } else {
      std::copy_n(other.local_, size_, local_);
    }
    other.size_ = 0;
    other.capacity_ = 0;
  }

  T local_[N];
  size_t size_ = 0;
  size_t capacity_ = 0;  // of heap_, where it is set
  std::unique_ptr<T[]> heap_;
};

}  // namespace ringreduce
