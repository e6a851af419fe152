// Test support: the reference of one problem computed at one thread and at two, and its arrays
// compared bit for bit (the reference promises the same bits at any thread count:
// tests/unit/reference/linear_test.cc, s_bound_test.cc).
#pragma once

#include <omp.h>

#include <cstring>
#include <utility>

#include "reference/linear.h"

namespace ncert::testing {

/// The reference of `problem` computed with one thread, then with two.
inline auto reference_at_one_and_two_threads(const reference::LinearProblem& problem,
                                             const reference::ReferenceOptions& options) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  auto one = reference::compute_reference(problem, options);
  omp_set_num_threads(2);
  auto two = reference::compute_reference(problem, options);
  omp_set_num_threads(saved);
  return std::pair{std::move(one), std::move(two)};
}

/// Two arrays of the same element type hold the same bits.
template <typename Array>
bool same_array_bits(const Array& a, const Array& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
}

}  // namespace ncert::testing
