// This header defines the wire form of a check's typed evidence (evidence.h): how evidence
// crosses a process boundary (report/wire.h: a campaign's isolated workers, MPI ranks, the
// campaign journal) and comes back as the same typed value, so whatever renders or inspects it
// afterwards sees exactly what the check computed. A report that went through the wire renders
// byte-identically to the original in text, JSON, HTML and JUnit (tests/unit/certify/wire_test.cc).
//
// The wire form is not the report's `stats` (render_json.cc): those lay out what a reader
// needs, leave members out (a witness's row hash, a row comparison's first differing column) and
// lay some out only for some kinds or verdicts. The wire form is complete:
//   {"type": "<alternative>", "<member>": <value>, ...}
// with every member of the struct under its own name, nested records as objects, std::optional
// as null or the value, enumerations by their names (ErrorCode by its number). Numbers are exact:
// integers as JSON integers, finite floating-point values as the shortest decimal that reads
// back to the same bits, infinities as "inf" / "-inf" and NaNs as "nan:0x<bits>" (so a NaN's
// payload, which the HTML page shows in a failing value's bits, survives).
//
// evidence_wire.cc holds one table per struct listing its members once; the encoder and the
// decoder both walk it, so a member cannot be written and not read. A new Evidence alternative
// does not compile until it has a table and a wire name there.
#pragma once

#include <string_view>

#include "certify/report/report.h"

namespace ncert::certify {

/// The evidence as wire JSON: {"type": ..., every member}.
Json evidence_to_wire(const Evidence& evidence);

/// The typed evidence back from evidence_to_wire's JSON. kInvalidArgument naming the member
/// ("evidence.outputs[1].stats.elements: not an integer") when the JSON is not evidence of a
/// known type: a missing or unknown member, a value of the wrong type or out of the member's
/// range, or containers that break their struct's invariants (a histogram whose bins do not
/// span its axis, a failure map whose cells are not its rows x columns).
Result<Evidence> evidence_from_wire(const Json& wire);

/// The wire name of the evidence's alternative ("bound", "fork", "none" for std::monostate).
std::string_view evidence_type_name(const Evidence& evidence);

}  // namespace ncert::certify
