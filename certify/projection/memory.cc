#include "certify/projection/memory.h"

#include <string>

namespace ncert::certify {

namespace {

std::uint64_t u(Index v) { return v > 0 ? static_cast<std::uint64_t>(v) : 0; }

/// a * b saturating at 2^64 - 1: declared shapes are untrusted.
std::uint64_t mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
std::uint64_t add(std::uint64_t a, std::uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

std::string binary_size(std::uint64_t bytes) {
  char buf[32];
  // Under 1 GiB in MiB: --max-memory 1048576 read "0.00 GiB".
  if (bytes < (std::uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1u << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1u << 30));
  }
  return buf;
}

}  // namespace

std::uint64_t projection_peak_bytes(const DumpModel& model, const ProjectionInfo& info, int threads, Index block_cols,
                                    std::uint64_t weights_elsewhere) {
  // Every member of the projection is read whole, raw.
  std::uint64_t total = weights_elsewhere;
  for (const DatasetInfo& d : model.datasets_under(info.path + "/")) total = add(total, u(d.bytes));
  const std::uint64_t M = u(info.m), K = u(info.k), N = u(info.n), bc = u(block_cols);
  // The reference's activations: exact f64, |x| f64, the f32 the walk multiplies, the f32
  // magnitudes, their bf16 copy and its widened f32 form for S (30 B), and the exact f64 packed
  // once for y* (8 B: the unpacked copy is given back once packed, but both exist meanwhile;
  // reference/detail/gemm.h PackedActivations).
  total = add(total, mul(mul(M, K), 38));
  // Per thread, one block (reference/linear.cc size_scratch and block_s), at most 38 B per
  // weight: three f64 forms (exact; the spread of two-valued weights; the magnitudes, only when
  // S overflows f32), the f32 magnitudes and kernel copy, the bf16 magnitudes, and the portable
  // S kernel's widened chunk (4 B per weight up to 1,024 of K, reference/detail/s_bf16.cc);
  // and 92 B of f64/f32 values per (row, block column): S in f32 and f64, bound, tier, center,
  // sigma, slack, two intervals, the walk and its scratch.
  const std::uint64_t per_thread = add(mul(mul(bc, K), 38), mul(mul(M, bc), 92));
  total = add(total, mul(per_thread, u(threads)));
  // The comparisons' per-element facts over the outputs (row maps, accepted-interval flags and
  // bias residuals) and the widened f32 values of each output present: 24 B per element.
  total = add(total, mul(mul(M, N), 24));
  return total;
}

Status check_projection_memory(const DumpModel& model, const ProjectionInfo& info, int threads, Index block_cols,
                               std::uint64_t budget, std::uint64_t weights_elsewhere) {
  const std::uint64_t need = projection_peak_bytes(model, info, threads, block_cols, weights_elsewhere);
  if (need <= budget) return Status();
  return Status(ErrorCode::kMemoryLimit,
                model.file + ": " + info.path + ": certifying this projection needs about " + binary_size(need) + " (" +
                    std::to_string(need) + " bytes: x [" + std::to_string(info.m) + ", " + std::to_string(info.k) +
                    "], W [" + std::to_string(info.n) + ", " + std::to_string(info.k) + "], " +
                    std::to_string(threads) + " threads), over the memory budget of " + binary_size(budget) +
                    " (--max-memory " + std::to_string(budget) + "); refused before reading it");
}

}  // namespace ncert::certify
