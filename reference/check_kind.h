// This header defines CheckKind, the kinds of checks ncert reports (the `kind` of a report's
// checks, docs/cli.md), as a typed value. It sits beside the error vocabulary (status.h) at
// the bottom of the layering because two independent sides speak it: the certifier, whose checks
// carry a kind, and the fixtures' fault table, which names the kind that must catch each planted
// fault. Names are rendered only at the report's edge (check_kind_name).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ncert {

enum class CheckKind : std::uint8_t {
  kSchema,     ///< the dump is valid (dump format v1 or v2)
  kGeometry,   ///< the projection's packing plan passes the host guards
  kIdentity,   ///< packed and unpacked outputs agree bit for bit (also the sweep's identity)
  kBound,      ///< every output lies in the rigorous interval of the exact reference
  kWalk,       ///< outputs equal the declared K walk emulated bit for bit
  kUntouched,  ///< unselected rows and padding columns keep y_before's bits
  kBias,       ///< the signed rounding residuals of a round-to-nearest output are centered
  kSignature,  ///< no (column, K range) of the residuals carries a fault's signature
  kVariance,   ///< the residuals' energy is within what any f32 summation order allows
  kQuantize,   ///< every quantized activation is the declared rounding of x / scale
  kVacuity,    ///< the projection, or the dump, proves something
  kWitness,    ///< every emitted token is its raw row's maximum
  kLogits,     ///< two runs' logits agree under a policy
  kTensor,     ///< two dumps' state tensors agree under a policy
  kFork,       ///< a wording fork and its class
  kGuard,      ///< the sweep: planted violations refused with the expected guard code
  kAlias,      ///< the sweep: in-place residual cases identical to the unpacked path
};

inline constexpr std::array<CheckKind, 17> kAllCheckKinds = {
    CheckKind::kSchema,    CheckKind::kGeometry, CheckKind::kIdentity,  CheckKind::kBound,    CheckKind::kWalk,
    CheckKind::kUntouched, CheckKind::kBias,     CheckKind::kSignature, CheckKind::kVariance, CheckKind::kQuantize,
    CheckKind::kVacuity,   CheckKind::kWitness,  CheckKind::kLogits,    CheckKind::kTensor,   CheckKind::kFork,
    CheckKind::kGuard,     CheckKind::kAlias};

/// The kind as spelled in reports and on the command line ("identity", "bound", ...).
constexpr std::string_view check_kind_name(CheckKind k) {
  switch (k) {
    case CheckKind::kSchema:
      return "schema";
    case CheckKind::kGeometry:
      return "geometry";
    case CheckKind::kIdentity:
      return "identity";
    case CheckKind::kBound:
      return "bound";
    case CheckKind::kWalk:
      return "walk";
    case CheckKind::kUntouched:
      return "untouched";
    case CheckKind::kBias:
      return "bias";
    case CheckKind::kSignature:
      return "signature";
    case CheckKind::kVariance:
      return "variance";
    case CheckKind::kQuantize:
      return "quantize";
    case CheckKind::kVacuity:
      return "vacuity";
    case CheckKind::kWitness:
      return "witness";
    case CheckKind::kLogits:
      return "logits";
    case CheckKind::kTensor:
      return "tensor";
    case CheckKind::kFork:
      return "fork";
    case CheckKind::kGuard:
      return "guard";
    case CheckKind::kAlias:
      return "alias";
  }
  return "?";
}

/// The inverse of check_kind_name (for --require lists); nullopt for an unknown name.
constexpr std::optional<CheckKind> parse_check_kind(std::string_view name) {
  for (CheckKind k : kAllCheckKinds) {
    if (check_kind_name(k) == name) return k;
  }
  return std::nullopt;
}

}  // namespace ncert
