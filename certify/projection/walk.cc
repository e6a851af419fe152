// walk: when the dump declares the kernel's K walk, every engine value equals the walk emulated
// bit for bit (reference/k_walk.h), epilogue included.
#include "certify/projection/checks.h"
#include "certify/projection/detail/text.h"

namespace ncert::certify {

CheckResult walk_check(const ProjectionFacts& f, const ReferencePass& pass) {
  const ProjectionInfo& info = f.info();
  CheckResult r = projection_check(info, CheckKind::kWalk);
  WalkEvidence e;
  e.k_walk = info.walk.name;
  std::optional<EngineOutputId> first;
  for (EngineOutputId id : kAllEngineOutputs) {
    if (!f.data.output(id).present) continue;
    const WalkTally& w = pass.walk[static_cast<std::size_t>(id)];
    e.outputs.push_back({std::string(engine_output_name(id)), w.compared, w.mismatches});
    e.compared += w.compared;
    e.mismatches += w.mismatches;
    if (!first && w.mismatches > 0) first = id;
  }
  if (first) {
    const WalkTally& w = pass.walk[static_cast<std::size_t>(*first)];
    const std::string name(engine_output_name(*first));
    const Index slot = *first != EngineOutputId::kUnpacked ? f.slot_of_row[static_cast<std::size_t>(w.row)] : -1;
    r.verdict = Verdict::kFail;
    r.reason = name + " " + detail::where(w.row, w.col, slot) + " differs from the emulated " + info.walk.name +
               " walk: engine " + detail::hex_bits(w.engine, info.output) + " vs walk " +
               detail::hex_bits(w.walk, info.output) + "; " + std::to_string(e.mismatches) + " of " +
               std::to_string(e.compared) + " values differ";
    r.first_failure = Location{name, w.row, w.col, slot};
  } else {
    r.reason = "all " + std::to_string(e.compared) + " engine values equal the emulated " + info.walk.name +
               " walk bit for bit";
  }
  r.evidence = std::move(e);
  return r;
}

}  // namespace ncert::certify
