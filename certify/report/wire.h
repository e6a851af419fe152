// This header defines how check results travel between processes (a campaign's isolated
// workers, MPI ranks, its journal): as JSON text that carries everything the report renders,
// so the report assembled from them is byte-identical to the one the checks' own command
// writes (evidence arrives as RenderedEvidence: its JSON stats, rendered where it ran).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "certify/report/report.h"

namespace ncert::certify {

/// One check as JSON: check_json(c) plus subject, first failure and whether details always show.
Json check_to_wire(const CheckResult& check);
/// The check back (kInvalidArgument naming the field when the JSON is not one).
Result<CheckResult> check_from_wire(const Json& wire);

Json checks_to_wire(const std::vector<CheckResult>& checks);
Result<std::vector<CheckResult>> checks_from_wire(const Json& wire);

/// A whole report as JSON (checks in wire form, inputs, stats, extra, error, preamble) and back.
Json report_to_wire(const Report& report);
Result<Report> report_from_wire(const Json& wire);

/// A Status as JSON {code, message, detail} and back (into *out; kInvalidArgument if malformed).
Json status_to_wire(const Status& status);
Status status_from_wire(const Json& wire, Status* out);

/// Every string and key of `j` made valid UTF-8 (invalid bytes as \xNN text), so it can be
/// dumped: the renderers escape the same way, so nothing changes on the way.
Json utf8_repaired(Json j);

}  // namespace ncert::certify
