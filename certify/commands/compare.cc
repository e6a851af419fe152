#include "certify/commands/compare.h"

#include <chrono>
#include <set>

#include "certify/logits/compare.h"
#include "certify/logits/forks.h"
#include "certify/logits/tensor_compare.h"
#include "certify/report/progress.h"

namespace ncert::certify {

namespace {

Result<Report> compare_files(const CompareOptions& o, InputHashes& hashes) {
  const auto t0 = std::chrono::steady_clock::now();
  Report report;
  report.command = "compare";
  auto refuse = [&](const Status& s) { return report.refuse(s); };
  auto ra = DumpReader::open(o.a, o.reader);
  if (!ra.ok()) return refuse(ra.status());
  auto rb = DumpReader::open(o.b, o.reader);
  if (!rb.ok()) return refuse(rb.status());
  const DumpModel& A = ra->model();
  const DumpModel& B = rb->model();
  report.preamble.push_back("ncert compare " + o.a + " (" + A.engine + " " + A.build + ") vs " + o.b + " (" + B.engine +
                            " " + B.build + ")");

  NCERT_ASSIGN_OR_RETURN(RunPairing paired, pair_runs(A, B, o.pairs, o.a, o.b));
  const auto& pairs = paired.pairs;
  const auto& one_sided = paired.one_sided;
  std::set<std::string> tensor_names;
  for (const auto& t : A.tensors) tensor_names.insert(t.name);
  for (const auto& t : B.tensors) tensor_names.insert(t.name);
  if (pairs.empty() && tensor_names.empty()) {
    return refuse(no_common_runs(A, B, o.a, o.b, true));
  }
  if (Status s = check_vocabularies(paired, o.a, o.b); !s.ok()) return refuse(s);
  Index bytes = 0;
  for (const auto& [x, y] : pairs) {
    // The default depends on the pair's dtypes, known from the dump model before any row is read.
    const auto dtype_of = [](const DumpModel& m, const LogitsRunInfo& r) {
      const DatasetInfo* d = m.dataset(r.path + "/logits");
      return d ? d->dtype : DType::kF32;
    };
    const DType type_a = dtype_of(A, *x), type_b = dtype_of(B, *y);
    const auto [policy, source] =
        o.policy ? std::pair<Policy, std::string>{*o.policy, "--policy"} : default_policy(type_a, type_b);
    NCERT_ASSIGN_OR_RETURN(RunComparison c, compare_runs(*ra, *x, *rb, *y, o.matched_history, element_test(policy),
                                                         hashes.cursor(0), hashes.cursor(1)));
    bytes += 2 * c.matched * c.vocab * 4;
    std::optional<RunForks> forks;
    if (policy.kind == Policy::Kind::kForks) {
      // The forks of the rows just compared, classed by `forks`'s own code with its defaults
      // (the lambda of the reference bounds, no --logit-error): the one verdict both commands give.
      ForksOptions fo;
      fo.matched_history = o.matched_history;
      NCERT_ASSIGN_OR_RETURN(forks, find_forks(*ra, *x, *rb, *y, c, fo));
    }
    report.checks.push_back(logits_check(c, policy, source, forks ? &*forks : nullptr));
  }
  for (const std::string& s : one_sided) {
    CheckResult c;
    c.id = s.substr(0, s.find(' '));
    c.kind = CheckKind::kLogits;
    c.verdict = o.allow_missing ? Verdict::kPass : Verdict::kFail;
    c.reason = "present in " + s.substr(s.find('(') + 1, 1) + " only" +
               (o.allow_missing ? " (allowed by --allow-missing)" : "");
    report.checks.push_back(std::move(c));
  }
  for (const std::string& n : tensor_names) {
    const TensorInfo* ta = nullptr;
    const TensorInfo* tb = nullptr;
    for (const auto& t : A.tensors)
      if (t.name == n) ta = &t;
    for (const auto& t : B.tensors)
      if (t.name == n) tb = &t;
    if (!ta || !tb) {
      CheckResult c;
      c.id = "tensors/" + n;
      c.kind = CheckKind::kTensor;
      c.verdict = o.allow_missing ? Verdict::kPass : Verdict::kFail;
      c.reason = std::string("present in ") + (ta ? "A" : "B") + " only" +
                 (o.allow_missing ? " (allowed by --allow-missing)" : "");
      report.checks.push_back(std::move(c));
      continue;
    }
    Policy p;
    bool overridden = false;
    if (o.tensor_policy) {
      p = *o.tensor_policy;
      overridden = true;
    } else {
      // A's attribute applies where both declare one (docs/cli.md); each is held to the
      // grammar, so that a typo on B's side is refused as on A's rather than passed over.
      for (const auto& [t, file] : {std::pair{ta, &o.a}, std::pair{tb, &o.b}}) {
        if (t->compare.empty()) continue;
        auto parsed = tensor_attribute_policy(*t);
        if (!parsed.ok()) return refuse(parsed.status().with_context(*file + ": " + t->path));
        if (t == ta || ta->compare.empty()) p = *parsed;
      }
    }
    NCERT_ASSIGN_OR_RETURN(CheckResult c, tensor_check(*ra, *ta, *rb, *tb, p, overridden));
    const DatasetInfo* d = A.dataset(ta->path);
    if (d) bytes += 2 * d->bytes;
    report.checks.push_back(std::move(c));
  }
  const double seconds = seconds_since(t0);
  report.stats["runs"] = pairs.size();
  report.stats["tensors"] = tensor_names.size();
  report.stats["bytes_compared"] = bytes;
  report.stats["timing_seconds"] = seconds;
  report.stats["timing_gb_per_second"] = seconds > 0 ? static_cast<double>(bytes) / seconds * 1e-9 : 0;
  return report;
}

}  // namespace

Result<Report> run_compare(const CompareOptions& o) {
  InputHashes hashes({o.a, o.b});
  Result<Report> r = compare_files(o, hashes);
  if (r.ok()) r->inputs = hashes.finish();
  return r;
}

}  // namespace ncert::certify
