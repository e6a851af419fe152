// The sweep's case table and its repro keys: SweepCase::key() prints a case as
// "pack(kind=...,R=...,...,seed=...)", parse_case() reads it back, default_cases() builds the
// table family by family.
#include <algorithm>
#include <charconv>
#include <map>

#include "packing/sweep.h"

namespace ncert::packing {

using reference::Epilogue;
using reference::ResidualAt;

namespace {

std::string kind_name(CaseKind k) {
  switch (k) {
    case CaseKind::kIdentity:
      return "identity";
    case CaseKind::kGuard:
      return "guard";
    case CaseKind::kWidth:
      return "width";
  }
  return "?";
}

}  // namespace

std::string SweepCase::key() const {
  std::string s = "pack(kind=" + kind_name(kind);
  auto add = [&](const char* name, const std::string& v) { s += std::string(",") + name + "=" + v; };
  add("R", std::to_string(requests));
  add("B", std::to_string(block_rows));
  add("cap", std::to_string(cap));
  add("P", std::to_string(slots));
  add("commit", commit);
  add("fmt", formats);
  add("K", std::to_string(k));
  add("N", std::to_string(n));
  add("inpad", std::to_string(in_pad));
  add("outpad", std::to_string(out_pad));
  add("cpad", std::to_string(compact_pad));
  add("x", std::string(dtype_name(x)));
  add("y", std::string(dtype_name(output)));
  add("bias", std::string(dtype_name(bias)));
  add("res", std::string(dtype_name(residual)));
  add("epi", std::string(reference::epilogue_name(epilogue)));
  add("at", std::string(reference::residual_at_name(at)));
  add("inplace", inplace ? "1" : "0");
  add("walk", walk.empty() ? "none" : walk);
  add("perm", permute ? "1" : "0");
  add("guard", guard.empty() ? "none" : guard);
  add("seed", std::to_string(seed));
  return s + ")";
}

namespace {

/// The name=value fields of one repro key, taken one by one; every refusal names the key.
class KeyFields {
 public:
  explicit KeyFields(std::string_view key) : key_(key) {}

  Status bad(const std::string& why) const {
    return Status(ErrorCode::kUsage, "sweep case \"" + std::string(key_) + "\": " + why);
  }

  /// Splits "pack(name=value,...)" into its fields.
  Status split() {
    if (key_.substr(0, 5) != "pack(" || key_.empty() || key_.back() != ')') {
      return bad("expected pack(name=value,...)");
    }
    std::string_view body = key_.substr(5, key_.size() - 6);
    while (!body.empty()) {
      const std::size_t comma = body.find(',');
      const std::string_view item = body.substr(0, comma);
      const std::size_t eq = item.find('=');
      if (eq == std::string_view::npos) return bad("field \"" + std::string(item) + "\" has no '='");
      fields_[std::string(item.substr(0, eq))] = std::string(item.substr(eq + 1));
      if (comma == std::string_view::npos) break;
      body = body.substr(comma + 1);
    }
    return Status();
  }

  Result<std::string> take(const char* name) {
    auto it = fields_.find(name);
    if (it == fields_.end()) return bad(std::string("missing field ") + name);
    std::string v = it->second;
    fields_.erase(it);
    return v;
  }

  Status take_int(const char* name, Index* out) {
    NCERT_ASSIGN_OR_RETURN(std::string v, take(name));
    long long n = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || p != v.data() + v.size()) return bad(std::string(name) + " = " + v + " is not an integer");
    *out = n;
    return Status();
  }

  Status take_dtype(const char* name, DType* out) {
    NCERT_ASSIGN_OR_RETURN(std::string v, take(name));
    auto t = parse_dtype(v);
    if (!t || !is_float_dtype(*t)) return bad(std::string(name) + " = " + v + " is not f32/bf16");
    *out = *t;
    return Status();
  }

  /// Refuses the first field no take() asked for.
  Status none_left() const {
    if (!fields_.empty()) return bad("unknown field " + fields_.begin()->first);
    return Status();
  }

 private:
  std::string_view key_;
  std::map<std::string, std::string> fields_;
};

/// Every field of the key, in key() order, into `c`; values are checked only for their syntax.
Status read_fields(KeyFields& f, SweepCase& c) {
  NCERT_ASSIGN_OR_RETURN(std::string kind, f.take("kind"));
  if (kind == "identity")
    c.kind = CaseKind::kIdentity;
  else if (kind == "guard")
    c.kind = CaseKind::kGuard;
  else if (kind == "width")
    c.kind = CaseKind::kWidth;
  else
    return f.bad("kind = " + kind);
  NCERT_RETURN_IF_ERROR(f.take_int("R", &c.requests));
  NCERT_RETURN_IF_ERROR(f.take_int("B", &c.block_rows));
  NCERT_RETURN_IF_ERROR(f.take_int("cap", &c.cap));
  NCERT_RETURN_IF_ERROR(f.take_int("P", &c.slots));
  NCERT_ASSIGN_OR_RETURN(c.commit, f.take("commit"));
  NCERT_ASSIGN_OR_RETURN(c.formats, f.take("fmt"));
  NCERT_RETURN_IF_ERROR(f.take_int("K", &c.k));
  NCERT_RETURN_IF_ERROR(f.take_int("N", &c.n));
  NCERT_RETURN_IF_ERROR(f.take_int("inpad", &c.in_pad));
  NCERT_RETURN_IF_ERROR(f.take_int("outpad", &c.out_pad));
  NCERT_RETURN_IF_ERROR(f.take_int("cpad", &c.compact_pad));
  NCERT_RETURN_IF_ERROR(f.take_dtype("x", &c.x));
  NCERT_RETURN_IF_ERROR(f.take_dtype("y", &c.output));
  NCERT_RETURN_IF_ERROR(f.take_dtype("bias", &c.bias));
  NCERT_RETURN_IF_ERROR(f.take_dtype("res", &c.residual));
  NCERT_ASSIGN_OR_RETURN(std::string epi, f.take("epi"));
  auto e = reference::parse_epilogue(epi);
  if (!e.ok()) return f.bad(e.status().message());
  c.epilogue = *e;
  NCERT_ASSIGN_OR_RETURN(std::string at, f.take("at"));
  auto a = reference::parse_residual_at(at);
  if (!a.ok()) return f.bad(a.status().message());
  c.at = *a;
  Index flag = 0;
  NCERT_RETURN_IF_ERROR(f.take_int("inplace", &flag));
  c.inplace = flag != 0;
  NCERT_ASSIGN_OR_RETURN(c.walk, f.take("walk"));
  if (c.walk == "none") c.walk.clear();
  if (!c.walk.empty() && !reference::parse_k_walk(c.walk).ok()) return f.bad("walk = " + c.walk);
  NCERT_RETURN_IF_ERROR(f.take_int("perm", &flag));
  c.permute = flag != 0;
  NCERT_ASSIGN_OR_RETURN(c.guard, f.take("guard"));
  if (c.guard == "none") c.guard.clear();
  Index seed = 0;
  NCERT_RETURN_IF_ERROR(f.take_int("seed", &seed));
  c.seed = static_cast<std::uint64_t>(seed);
  return f.none_left();
}

/// The values the sweep can run: a known commit class, format mix and guard, sizes in range.
Status check_values(const KeyFields& f, const SweepCase& c) {
  static const std::vector<std::string> kCommits = {"full",      "one",        "ragged", "single",
                                                    "alternate", "decreasing", "empty"};
  if (std::find(kCommits.begin(), kCommits.end(), c.commit) == kCommits.end()) {
    return f.bad("commit = " + c.commit);
  }
  static const std::vector<std::string> kFormats = {"bf16", "f32", "af4a", "af4c", "mix"};
  if (std::find(kFormats.begin(), kFormats.end(), c.formats) == kFormats.end()) {
    return f.bad("fmt = " + c.formats);
  }
  if (c.requests < 1 || c.block_rows < 1 || c.k < 1 || c.n < 1 || c.slots < 0 || c.cap < 0 || c.in_pad < 0 ||
      c.out_pad < 0 || c.compact_pad < 0 || c.k > (1 << 20) || c.n > (1 << 20) ||
      c.requests * c.block_rows > (1 << 16)) {
    return f.bad("sizes out of range");
  }
  if (!c.guard.empty()) {
    const auto& names = guard_names();
    if (std::none_of(names.begin(), names.end(), [&](const auto& g) { return g.first == c.guard; })) {
      return f.bad("guard = " + c.guard);
    }
  }
  return Status();
}

}  // namespace

Result<SweepCase> parse_case(std::string_view key) {
  KeyFields f(key);
  NCERT_RETURN_IF_ERROR(f.split());
  SweepCase c;
  NCERT_RETURN_IF_ERROR(read_fields(f, c));
  NCERT_RETURN_IF_ERROR(check_values(f, c));
  return c;
}

// ---- the table: one builder per family of cases ------------------------------------------------

namespace {

/// R x commit class x (cap, B) x format mix x output type x the 11 epilogue variants; the
/// other dimensions (K, N, pads, activation type, walk, slot order) cycle with the case index.
void add_identity_cases(std::vector<SweepCase>& cases) {
  const std::vector<std::string> commits = {"full", "one", "ragged", "single", "alternate", "decreasing"};
  const std::pair<Index, Index> cap_b[] = {{1, 2}, {2, 4}, {4, 4}};
  const std::vector<std::string> formats = {"bf16", "f32", "af4a", "af4c", "mix"};
  const Index ks[] = {32, 64, 96, 160};
  const Index ns[] = {8, 24, 40, 72};
  const Index in_pads[] = {0, 8, 24};
  const Index out_pads[] = {0, 8};
  const std::vector<std::string> walks = {"", "seq", "seq-fma", "split:2", "split:4:fma", "split:8", "split:16:fma"};
  // The 11 epilogue variants: none; bias (f32, bf16); residual and bias+residual at f32 and at
  // output, each separate and in place.
  struct Epi {
    Epilogue e;
    ResidualAt at;
    bool inplace;
    bool bf16_bias;
  };
  const Epi epis[] = {{Epilogue::kNone, ResidualAt::kF32, false, false},
                      {Epilogue::kBias, ResidualAt::kF32, false, false},
                      {Epilogue::kBias, ResidualAt::kF32, false, true},
                      {Epilogue::kResidual, ResidualAt::kF32, false, false},
                      {Epilogue::kResidual, ResidualAt::kOutput, false, false},
                      {Epilogue::kBiasResidual, ResidualAt::kF32, false, false},
                      {Epilogue::kBiasResidual, ResidualAt::kOutput, false, true},
                      {Epilogue::kResidual, ResidualAt::kF32, true, false},
                      {Epilogue::kResidual, ResidualAt::kOutput, true, false},
                      {Epilogue::kBiasResidual, ResidualAt::kF32, true, false},
                      {Epilogue::kBiasResidual, ResidualAt::kOutput, true, true}};
  std::uint64_t idx = 0;
  for (Index r = 1; r <= kMaxRequests; ++r) {
    for (const std::string& commit : commits) {
      for (const auto& [cap, b] : cap_b) {
        for (const std::string& fmt : formats) {
          for (DType out : {DType::kF32, DType::kBf16}) {
            for (const Epi& e : epis) {
              SweepCase c;
              c.kind = CaseKind::kIdentity;
              c.requests = r;
              c.block_rows = b;
              c.cap = cap;
              c.slots = r * cap + (idx % 3 == 0 ? 3 : 0);
              c.commit = commit;
              c.formats = fmt;
              c.k = ks[idx % 4];
              c.n = ns[(idx / 4) % 4];
              c.in_pad = in_pads[idx % 3];
              c.out_pad = out_pads[(idx / 3) % 2];
              c.compact_pad = (idx / 5) % 2 ? 4 : 0;
              c.x = (idx / 7) % 2 ? DType::kF32 : DType::kBf16;
              c.output = out;
              c.bias = e.bf16_bias ? DType::kBf16 : DType::kF32;
              c.epilogue = e.e;
              c.at = e.at;
              c.inplace = e.inplace;
              // A separate residual may be f32 under a bf16 output when added at f32.
              c.residual = (e.at == ResidualAt::kF32 && !e.inplace && idx % 2) ? DType::kF32 : out;
              c.walk = walks[idx % walks.size()];
              c.permute = (idx / 11) % 2 == 1;
              c.seed = 1000 + idx;
              cases.push_back(c);
              ++idx;
            }
          }
        }
      }
    }
  }
}

/// Empty commits: nothing gathered, nothing written.
void add_empty_commit_cases(std::vector<SweepCase>& cases) {
  for (Index r = 1; r <= kMaxRequests; ++r) {
    for (DType out : {DType::kF32, DType::kBf16}) {
      SweepCase c;
      c.requests = r;
      c.commit = "empty";
      c.output = out;
      c.formats = r % 2 ? "mix" : "af4a";
      c.epilogue = Epilogue::kBiasResidual;
      c.inplace = true;
      c.residual = out;
      c.slots = r * c.cap;
      c.seed = 50000 + static_cast<std::uint64_t>(r) * 2 + (out == DType::kBf16);
      cases.push_back(c);
    }
  }
}

/// Realistic padded strides: the in-projection output (16480 valid of 16640) and an input with
/// the same padding (K = 16480 = 515 AF4 groups of 32).
void add_wide_stride_cases(std::vector<SweepCase>& cases) {
  for (DType out : {DType::kF32, DType::kBf16}) {
    for (const std::string fmt : {"bf16", "mix"}) {
      for (bool inplace : {false, true}) {
        SweepCase c;
        c.requests = 2;
        c.block_rows = 2;
        c.cap = 1;
        c.slots = 3;
        c.k = 16;
        c.n = 16480;
        c.out_pad = 160;
        c.formats = fmt;
        c.output = out;
        c.residual = out;
        c.epilogue = Epilogue::kBiasResidual;
        c.inplace = inplace;
        c.walk = "seq-fma";
        c.seed = 60000 + cases.size();
        cases.push_back(c);
      }
    }
    for (const std::string fmt : {"bf16", "af4a"}) {
      SweepCase c;
      c.requests = 1;
      c.block_rows = 2;
      c.cap = 2;
      c.slots = 2;
      c.k = 16480;
      c.in_pad = 160;
      c.n = 8;
      c.formats = fmt;
      c.output = out;
      c.walk = "split:4:fma";
      c.seed = 61000 + cases.size();
      cases.push_back(c);
    }
  }
}

/// Width buckets: shared weights, identical rows at 512 and 8192.
void add_width_cases(std::vector<SweepCase>& cases) {
  for (DType x : {DType::kBf16, DType::kF32}) {
    for (const std::string walk : {"", "split:2:fma"}) {
      SweepCase c;
      c.kind = CaseKind::kWidth;
      c.k = 16;
      c.n = 8;
      c.x = x;
      c.formats = x == DType::kBf16 ? "mix" : "af4c";
      c.walk = walk;
      c.seed = 62000 + cases.size();
      cases.push_back(c);
    }
  }
}

/// Guard cases: every violation on a valid base (R = 3, B = 4, cap = 2, mixed formats).
void add_guard_cases(std::vector<SweepCase>& cases) {
  for (const auto& [name, code] : guard_names()) {
    for (int variant = 0; variant < 2; ++variant) {
      SweepCase c;
      c.kind = name == "capacity" ? CaseKind::kWidth : CaseKind::kGuard;
      c.guard = name;
      c.requests = 3;
      c.block_rows = 4;
      c.cap = 2;
      c.slots = 8;
      c.commit = "full";
      c.formats = variant == 0 ? "mix" : "af4a";
      c.k = 64;
      c.n = 24;
      c.in_pad = 8;
      c.out_pad = 8;
      c.x = variant == 0 ? DType::kBf16 : DType::kF32;
      c.output = variant == 0 ? DType::kF32 : DType::kBf16;
      c.residual = c.output;
      c.epilogue = variant == 0 ? Epilogue::kBiasResidual : Epilogue::kBias;
      c.walk = variant == 0 ? "split:4:fma" : "";
      c.seed = 63000 + cases.size();
      if (c.kind == CaseKind::kWidth) {
        c.k = 16;
        c.n = 8;
      }
      cases.push_back(c);
    }
  }
}

}  // namespace

std::vector<SweepCase> default_cases() {
  std::vector<SweepCase> cases;
  cases.reserve(16500);
  add_identity_cases(cases);
  add_empty_commit_cases(cases);
  add_wide_stride_cases(cases);
  add_width_cases(cases);
  add_guard_cases(cases);
  return cases;
}

}  // namespace ncert::packing
