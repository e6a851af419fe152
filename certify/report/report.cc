#include "certify/report/report.h"

namespace ncert::certify {

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "PASS";
    case Verdict::kFail: return "FAIL";
    case Verdict::kSkip: return "SKIP";
  }
  return "?";
}

std::string_view witness_class_name(WitnessClass c) {
  switch (c) {
    case WitnessClass::kCertified: return "certified";
    case WitnessClass::kNearTie: return "near-tie";
    case WitnessClass::kTie: return "tie";
    case WitnessClass::kUnbounded: return "unbounded";
  }
  return "?";
}

std::string_view fork_class_name(ForkClass c) {
  switch (c) {
    case ForkClass::kTie: return "tie";
    case ForkClass::kNearTie: return "near-tie";
    case ForkClass::kUnexplained: return "unexplained";
    case ForkClass::kInvalid: return "invalid";
  }
  return "?";
}

std::string_view ncert_version() { return NCERT_VERSION; }

CheckResult not_evaluated(std::string id, CheckKind kind, const std::string& why) {
  CheckResult r;
  r.id = std::move(id);
  r.kind = kind;
  r.verdict = Verdict::kFail;
  r.reason = "not evaluated: " + why;
  r.evidence = NotEvaluatedEvidence{};
  return r;
}

int Report::failed_checks() const {
  int n = 0;
  for (const CheckResult& c : checks) n += c.failed();
  return n;
}

Verdict Report::verdict() const {
  return (error.has_value() || failed_checks() > 0) ? Verdict::kFail : Verdict::kPass;
}

int Report::exit_code() const {
  if (error.has_value()) return exit_code_for(error->code());
  return verdict() == Verdict::kPass ? 0 : 1;
}

Report& Report::refuse(const Status& status) {
  error = status;
  CheckResult schema;
  schema.id = "schema";
  schema.kind = CheckKind::kSchema;
  schema.verdict = Verdict::kFail;
  schema.reason = status.message();
  checks.push_back(std::move(schema));
  return *this;
}

}  // namespace ncert::certify
