// This header defines the JUnit XML report (`--junit PATH`, docs/cli.md "HTML and JUnit
// reports"), in the shape CI servers read (the Ant / Jenkins junit-10 schema): one <testsuites>
// holding one <testsuite name="ncert <command>"> with
//   - <properties>: ncert's version, the command, the verdict, and every input's path and
//     XXH3-128 (input.N.path, input.N.xxh3_128, N from 1);
//   - one <testcase> per check: classname from its subject with '/' as '.' ("projections/attn"
//     -> "projections.attn"; a check without subject uses its id), name the rest of its id
//     ("bound", "request-guards", a fork's position) or its kind;
//     a SKIP holds <skipped message="reason"/>; a FAIL holds <failure message="reason"
//     type="kind"> whose text is the reason, the detail lines and the check's JSON stats; a PASS
//     holds its reason as <system-out>;
//   - a refused input (the report's error) is the testcase of its "schema" check, with
//     <error message="..." type="error-name"> (counted in `errors`, not `failures`).
// Counts: tests = checks, failures = failing checks (the refusal excepted), errors = 0 or 1,
// skipped = skipped checks. The file carries no time or timestamp, so the same inputs give the
// same bytes. Everything is escaped: text from a dump is made printable (control characters as
// \xNN text, which XML 1.0 could not hold) and markup-escaped (detail/html_markup.h).
#pragma once

#include <string>

#include "certify/report/report.h"

namespace ncert::certify {

std::string render_junit(const Report& report);

}  // namespace ncert::certify
