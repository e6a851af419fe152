// Bytes: the buffer a dataset is read into. std::vector<std::uint8_t> value-initialises what it
// allocates, so reading a 337 MB weight dataset first zero-filled it (memset 23 % of a check's
// CPU, its page faults 24 %, by perf on tools/bench/bench_engine.py's dump) and then copied the
// file over the zeros. This allocator leaves the bytes uninitialised (each read fills them at
// once) and maps blocks of 1 MiB or more itself, asking for huge pages and populating them in one
// call instead of one fault per 4 KiB page: check's read of that dataset went from 1.35 s to
// 0.08-0.31 s (hashing and copying into huge pages miss the TLB far less).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

namespace ncert::certify {

namespace detail {

/// Large blocks from mmap (populated), small ones from operator new; both leave the bytes as
/// they are on default construction.
void* allocate_bytes(std::size_t n);
void release_bytes(void* p, std::size_t n) noexcept;

template <typename T>
struct UninitAllocator {
  using value_type = T;
  UninitAllocator() = default;
  template <typename U>
  explicit UninitAllocator(const UninitAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(allocate_bytes(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { release_bytes(p, n * sizeof(T)); }
  /// Default construction leaves the element uninitialised (the vector's resize(n) then costs
  /// nothing per element); any other construction is the usual one.
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <typename U>
  bool operator==(const UninitAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace detail

using Bytes = std::vector<std::uint8_t, detail::UninitAllocator<std::uint8_t>>;

}  // namespace ncert::certify
