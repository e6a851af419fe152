// Test helper: a check's `stats` exactly as the JSON report renders them (the report is the
// contract the tests hold ncert to).
#pragma once

#include "certify/report/report.h"

namespace ncert::certify {

inline Json stats(const CheckResult& c) { return check_json(c)["stats"]; }

}  // namespace ncert::certify
