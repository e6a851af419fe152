#include "certify/logits/policy.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

namespace ncert::certify {

namespace {

bool parse_double(std::string_view s, double* out) {
  const std::string str(s);
  char* end = nullptr;
  *out = std::strtod(str.c_str(), &end);
  return !str.empty() && end == str.c_str() + str.size() && std::isfinite(*out) && *out >= 0;
}

}  // namespace

Result<Policy> parse_policy(std::string_view s) {
  Policy p;
  p.text = std::string(s);
  auto bad = [&] {
    return Status(ErrorCode::kPolicyInvalid,
                  "policy \"" + std::string(s) + "\" is not one of bitwise, ulp:N, abs:A[,rel:R], kl:X, top1, forks");
  };
  if (s == "bitwise") return p;
  if (s == "top1") {
    p.kind = Policy::Kind::kTop1;
    return p;
  }
  if (s == "forks") {
    p.kind = Policy::Kind::kForks;
    return p;
  }
  if (s.substr(0, 4) == "ulp:") {
    std::uint64_t n = 0;
    const auto v = s.substr(4);
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || ptr != v.data() + v.size()) return bad();
    p.kind = Policy::Kind::kUlp;
    p.ulp = n;
    return p;
  }
  if (s.substr(0, 3) == "kl:") {
    if (!parse_double(s.substr(3), &p.kl)) return bad();
    p.kind = Policy::Kind::kKl;
    return p;
  }
  if (s.substr(0, 4) == "abs:") {
    std::string_view rest = s.substr(4);
    const std::size_t comma = rest.find(',');
    if (!parse_double(rest.substr(0, comma), &p.abs)) return bad();
    if (comma != std::string_view::npos) {
      const std::string_view r = rest.substr(comma + 1);
      if (r.substr(0, 4) != "rel:" || !parse_double(r.substr(4), &p.rel)) return bad();
    }
    p.kind = Policy::Kind::kAbs;
    return p;
  }
  return bad();
}

Result<Policy> parse_tensor_policy(std::string_view s) {
  Result<Policy> parsed = parse_policy(s);
  if (!parsed.ok()) {
    // The logits policies are not offered for a tensor.
    return Status(
        ErrorCode::kPolicyInvalid,
        "policy \"" + std::string(s) + "\" is not one of bitwise, ulp:N, abs:A[,rel:R] (the tensor policies)");
  }
  Policy p = *parsed;
  if (p.kind == Policy::Kind::kKl || p.kind == Policy::Kind::kTop1 || p.kind == Policy::Kind::kForks) {
    return Status(
        ErrorCode::kPolicyInvalid,
        "policy \"" + std::string(s) + "\" applies to logits only; tensors take bitwise, ulp:N or abs:A[,rel:R]");
  }
  return p;
}

Result<Policy> tensor_attribute_policy(const TensorInfo& tensor) {
  Result<Policy> parsed = parse_tensor_policy(tensor.compare);
  if (parsed.ok()) return parsed;
  return Status(parsed.status().code(), "compare = \"" + tensor.compare + "\": " + parsed.status().message());
}

}  // namespace ncert::certify
