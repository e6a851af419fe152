// Internal to the sweep: one case's buffers and weights. Every buffer is wrapped in canary bytes
// (checked after every call) and aligned to 64 bytes plus an optional deliberate misalignment;
// padding cells hold NaN patterns no arithmetic produces, so a copy of one is always caught.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "packing/helper.h"
#include "packing/sweep.h"

namespace ncert::packing::detail {

inline constexpr std::size_t kCanaryBytes = 64;

inline unsigned char canary_byte(std::size_t i) { return static_cast<unsigned char>(0xA5u ^ (i * 29u)); }

/// A heap buffer whose payload is surrounded by canary bytes (checked after every case) and
/// aligned to 64 bytes plus an optional deliberate misalignment.
class GuardedBuffer {
 public:
  GuardedBuffer() = default;
  explicit GuardedBuffer(std::size_t bytes, std::size_t misalign = 0) : bytes_(bytes), misalign_(misalign) {
    mem_.resize(bytes + 2 * kCanaryBytes + 64 + misalign);
    const auto base = reinterpret_cast<std::uintptr_t>(mem_.data());
    const std::uintptr_t start = base + kCanaryBytes;
    offset_ = kCanaryBytes + (64 - start % 64) % 64 + misalign;
    for (std::size_t i = 0; i < mem_.size(); ++i) mem_[i] = canary_byte(i);
  }
  // A copy gets its own aligned payload (a plain vector copy would keep the old offset on a
  // differently aligned allocation) and fresh canaries.
  GuardedBuffer(const GuardedBuffer& o) : GuardedBuffer(o.bytes_, o.misalign_) {
    if (bytes_ > 0) std::memcpy(data(), o.data(), bytes_);
  }
  GuardedBuffer& operator=(const GuardedBuffer& o) {
    if (this != &o) *this = GuardedBuffer(o);
    return *this;
  }
  GuardedBuffer(GuardedBuffer&&) noexcept = default;
  GuardedBuffer& operator=(GuardedBuffer&&) noexcept = default;
  unsigned char* data() { return mem_.data() + offset_; }
  const unsigned char* data() const { return mem_.data() + offset_; }
  std::size_t bytes() const { return bytes_; }
  bool intact() const {
    for (std::size_t i = 0; i < offset_; ++i) {
      if (mem_[i] != canary_byte(i)) return false;
    }
    for (std::size_t i = offset_ + bytes_; i < mem_.size(); ++i) {
      if (mem_[i] != canary_byte(i)) return false;
    }
    return true;
  }
  const std::vector<unsigned char>& raw() const { return mem_; }

 private:
  std::vector<unsigned char> mem_;
  std::size_t offset_ = 0;
  std::size_t bytes_ = 0;
  std::size_t misalign_ = 0;
};

/// rows x stride matrix: valid columns from gen(), padding columns NaN-patterned.
GuardedBuffer make_matrix(Index rows, Index stride, Index width, DType t, const std::function<float()>& gen,
                          std::size_t misalign = 0);

/// A case's weights: the segments' raw blobs, the views over them and their geometry.
struct WeightStore {
  std::vector<std::vector<unsigned char>> blobs;
  reference::Weights weights;
  std::vector<SegmentGeometry> geometry;
};
/// "bf16", "f32", "af4a" (affine u32-lsb, group 32), "af4c" (NF4 u8-msb, f16 scales) or "mix"
/// (AF4 with output dequant + bf16 + f32), N x K, drawn from `seed`.
WeightStore make_weights(const std::string& fmt, Index n, Index k, std::uint64_t seed);

/// Rows committed per request for the case's commit pattern.
std::vector<std::int32_t> commits_for(const SweepCase& c);

struct CaseData {
  PackPlan plan;
  WeightStore store;
  std::shared_ptr<const LinearKernel> kernel;
  GuardedBuffer x, residual, bias, out_before, compact_in, compact_out;
};

/// The valid plan of a case, its weights and kernel, and its buffers.
Result<std::unique_ptr<CaseData>> build(const SweepCase& c);
/// The buffers of a call writing into `out` (the residual is `out` itself when in place).
HostBuffers buffers_for(CaseData& d, GuardedBuffer& out, bool inplace);

/// "row 3 col 7".
std::string cell(Index r, Index c);
/// The raw pattern of element i in hex.
std::string hex_of(const unsigned char* base, DType t, Index i);
bool same_payload(const GuardedBuffer& a, const GuardedBuffer& b);

}  // namespace ncert::packing::detail
