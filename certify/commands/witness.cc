#include "certify/commands/witness.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>

#include "certify/io/hash.h"
#include "certify/logits/witness_file.h"
#include "certify/report/format.h"
#include "certify/report/report_file.h"
#include "reference/float_bits.h"

namespace ncert::certify {

namespace {

/// The system's reason libhdf5's error stack gives for a failed file operation ("; No space
/// left on device"), or nothing.
std::string os_reason(const Status& s) {
  const std::string& d = s.detail();
  const std::string key = "error message = '";
  const auto at = d.find(key);
  if (at == std::string::npos) return std::string();
  const auto end = d.find('\'', at + key.size());
  return end == std::string::npos ? std::string() : "; " + d.substr(at + key.size(), end - at - key.size());
}

std::string witness_line(const Witness& w) {
  std::string s = "position " + std::to_string(w.position) + "  token " + std::to_string(w.token) + "  logit " +
                  format_f32(w.logit);
  if (w.runner_up >= 0) {
    s += "  runner-up " + std::to_string(w.runner_up) + " at " + format_f32(w.runner_up_logit) + "  margin " +
         format_short(w.margin) + " (" + format_short(w.margin_dtype_ulps) + " " +
         std::string(dtype_name(w.logits_dtype)) + " ulps)";
  }
  // A failed emission has no class (the JSON counts it under failed, not unbounded).
  s += w.ok ? "  " + std::string(witness_class_name(w.cls)) : "  FAILED: " + w.failure;
  return s;
}

/// The run's emissions under its witness check: the tightest margins (where a fork could
/// happen), or every emission in order with `table`.
void add_table(CheckResult& c, const RunWitnesses& rw, bool table) {
  constexpr std::size_t kTightest = 5;
  std::vector<const Witness*> ws;
  for (const Witness& w : rw.witnesses) ws.push_back(&w);
  if (!table) {
    std::stable_sort(ws.begin(), ws.end(), [](const Witness* a, const Witness* b) { return a->margin < b->margin; });
    if (ws.size() > kTightest) ws.resize(kTightest);
    if (!ws.empty()) c.details.push_back("tightest margins (every emission: --verbose):");
  } else {
    c.details.push_back("every emission:");
  }
  for (const Witness* w : ws) c.details.push_back("  " + witness_line(*w));
  c.always_show_details = true;
}

}  // namespace

Result<Report> run_witness(const WitnessOptions& o) {
  Report report;
  report.command = "witness";
  InputHashes hashes({o.dump});
  auto reader = DumpReader::open(o.dump, o.reader);
  if (!reader.ok()) {
    report.inputs = hashes.finish();
    return report.refuse(reader.status());
  }
  if (!o.out.empty() && !o.overwrite) {
    struct stat st {};
    if (::stat(o.out.c_str(), &st) == 0) {
      return Status(ErrorCode::kOutputExists, o.out + ": exists; refusing to overwrite it (--force)");
    }
  }
  // The summary beside it is a report: it replaces an empty file or a report, --force or not
  // (a review's W.h5.json, a copy of a dump, was overwritten without a word). The CLI checks it
  // before it runs; a library caller gets the same rule here.
  if (!o.out.empty()) NCERT_RETURN_IF_ERROR(check_output_place(NamedPath{"--out's summary", o.out + ".json", true}));
  std::vector<RunWitnesses> runs;
  Json all = Json::object();
  if (!o.only.empty() &&
      std::none_of(reader->model().logits.begin(), reader->model().logits.end(),
                   [&](const LogitsRunInfo& r) { return r.name.find(o.only) != std::string::npos; })) {
    return Status(ErrorCode::kUsage, "--only \"" + o.only + "\" matches no logits run of " + o.dump);
  }
  for (const LogitsRunInfo& run : reader->model().logits) {
    if (!o.only.empty() && run.name.find(o.only) == std::string::npos) continue;
    NCERT_ASSIGN_OR_RETURN(LogitErrorModel model, error_model_for(*reader, run, o.logit_error, o.lambda));
    NCERT_ASSIGN_OR_RETURN(RunWitnesses rw, witness_run(*reader, run, std::move(model), hashes.cursor(0)));
    for (CheckResult& c : witness_checks(rw)) {
      if (c.kind == CheckKind::kWitness && c.id == "logits/" + run.name + "/witness") add_table(c, rw, o.table);
      report.checks.push_back(std::move(c));
    }
    Json list = Json::array();
    for (const Witness& w : rw.witnesses) list.push_back(witness_json(w));
    all[run.name] = list;
    runs.push_back(std::move(rw));
  }
  if (runs.empty()) {
    CheckResult v;
    v.id = "vacuity";
    v.subject = "dump";
    v.kind = CheckKind::kVacuity;
    v.verdict = Verdict::kFail;
    v.reason = "nothing to witness: the dump holds no logits run";
    report.checks.push_back(std::move(v));
  }
  report.apply(o.require);
  if (o.skip_policy) report.apply(*o.skip_policy);
  report.extra["witnesses"] = all;
  report.stats["runs"] = runs.size();
  report.inputs = hashes.finish();
  const InputInfo input = report.inputs.front();
  if (!o.out.empty()) {
    // A file that cannot be written never hides the verdict (a full disk read "input refused",
    // exit 3, the witnesses gone: a review's): it is an output error beside the report.
    if (Status s = write_witness_file(o.out, o.overwrite, reader->model(), input.xxh3_128, runs); !s.ok()) {
      report.output_errors.push_back(
          Status(ErrorCode::kReportWrite,
                 "--out " + o.out + ": the witness file could not be written: " + s.message() + os_reason(s)));
      return report;
    }
    // The JSON summary beside it: the same report, for tools that do not read HDF5.
    const std::string summary = o.out + ".json";
    if (Status s = write_report_file(summary, report.to_json().dump(2) + "\n"); !s.ok()) {
      report.output_errors.push_back(Status(
          ErrorCode::kReportWrite, s.message() + " (the witness file " + o.out + " was written, its summary not)"));
      return report;
    }
    report.stats["witness_file"] = o.out;
    report.stats["witness_summary"] = summary;
    report.preamble.push_back("wrote " + o.out + " and " + summary);
  }
  return report;
}

Result<Report> run_witness_verify(const VerifyOptions& o) {
  Report report;
  report.command = "witness";
  report.inputs = describe_inputs({o.witness_file, o.dump});
  auto wf = WitnessFile::open(o.witness_file, o.reader);
  if (!wf.ok()) return report.refuse(wf.status());
  auto dump = DumpReader::open(o.dump, o.reader);
  if (!dump.ok()) return report.refuse(dump.status());
  // The witness file records the whole-file hash of the dump it was made from: a failure on
  // another file says so (modified, or another dump), and so does a pass on one.
  const std::string witnessed = wf->source_hash();
  const std::string& dump_hash = report.inputs[1].xxh3_128;
  std::optional<bool> same_file;
  if (!witnessed.empty() && !dump_hash.empty()) same_file = witnessed == dump_hash;
  const std::string other_file =
      "the dump file is not the one witnessed (xxh3_128 " + dump_hash + ", witnessed " + witnessed + ")";
  for (const std::string& name : wf->runs()) {
    CheckResult c;
    c.id = "logits/" + name + "/witness";
    c.kind = CheckKind::kWitness;
    auto fail = [&](const std::string& why, std::int64_t position) {
      c.verdict = Verdict::kFail;
      c.reason = "run " + name + (position >= 0 ? " position " + std::to_string(position) : "") + ": " + why;
      if (position >= 0) c.first_failure = Location{"logits/" + name, -1, -1, -1, position};
    };
    const LogitsRunInfo* run = nullptr;
    for (const LogitsRunInfo& r : dump->model().logits) {
      if (r.name == name) run = &r;
    }
    if (!run) {
      fail("the dump has no /logits/" + name, -1);
    } else if (wf->stored_tokens(name) != run->tokens) {
      fail("the witness file holds " + std::to_string(wf->stored_tokens(name)) + " witnesses, the run " +
               std::to_string(run->tokens) + " tokens",
           -1);
    } else {
      auto stored = wf->read(name, run->tokens);
      if (!stored.ok()) {
        report.error = stored.status();
        return report;
      }
      const StoredRun& s = *stored;
      // Re-derive with the error model the witnesses were made with.
      NCERT_ASSIGN_OR_RETURN(LogitErrorModel model, error_model_for(*dump, *run, s.logit_error, o.lambda));
      NCERT_ASSIGN_OR_RETURN(RunWitnesses fresh, witness_run(*dump, *run, std::move(model)));
      const Index T = run->tokens;
      Index checked = 0;
      if (s.vocab != run->vocab) {
        fail("the witness file records a vocabulary of " + std::to_string(s.vocab) + ", the run has " +
                 std::to_string(run->vocab),
             -1);
      }
      for (Index t = 0; t < T && !c.failed(); ++t) {
        const Witness& w = fresh.witnesses[static_cast<std::size_t>(t)];
        const auto i = static_cast<std::size_t>(t);
        auto differs = [&](const std::string& field, const std::string& was, const std::string& now) {
          fail(field + " differs: stored " + was + ", dump gives " + now, s.position[i]);
        };
        if (s.row[i] != w.row || s.position[i] != w.position) {
          differs("row and position", std::to_string(s.row[i]) + " at " + std::to_string(s.position[i]),
                  std::to_string(w.row) + " at " + std::to_string(w.position));
        } else if (s.row_hash(t) != w.row_xxh3) {
          differs("row hash", s.row_hash(t), w.row_xxh3 + " (the row was modified)");
        } else if (s.token[i] != w.token) {
          differs("token", std::to_string(s.token[i]), std::to_string(w.token));
        } else if (reference::f32_bits(s.logit[i]) != reference::f32_bits(w.logit)) {
          differs("logit", hex_bits_f32(s.logit[i]), hex_bits_f32(w.logit));
        } else if (s.runner_up[i] != w.runner_up ||
                   reference::f32_bits(s.runner_up_logit[i]) != reference::f32_bits(w.runner_up_logit)) {
          differs("runner-up", std::to_string(s.runner_up[i]) + "/" + hex_bits_f32(s.runner_up_logit[i]),
                  std::to_string(w.runner_up) + "/" + hex_bits_f32(w.runner_up_logit));
        } else if (s.ties[i] != w.ties) {
          differs("ties", std::to_string(s.ties[i]), std::to_string(w.ties));
        } else if (s.cls[i] != stored_class(w)) {
          differs("class", stored_class_name(s.cls[i]), stored_class_name(stored_class(w)));
        }
        ++checked;
      }
      const bool field_differs = c.failed();
      // Matching stored witnesses certify only what they certified: none (an empty run), or
      // with failures among them, not the run (a reviewer's "all 6 stored witnesses match" of
      // a file recording a failed emission, and "all 0 ... match" of an empty run); nor rows
      // that are not their lm_head's outputs, whose margins no interval bounds.
      if (!c.failed() && T == 0) {
        c.verdict = Verdict::kFail;
        c.reason = "the witness file stores no emission for run " + name + " (0 tokens): nothing is certified";
      } else if (!c.failed() && fresh.failed > 0) {
        const auto first =
            std::find_if(fresh.witnesses.begin(), fresh.witnesses.end(), [](const Witness& w) { return !w.ok; });
        c.verdict = Verdict::kFail;
        c.reason = "all " + std::to_string(T) + " stored witnesses match the dump, but " +
                   std::to_string(fresh.failed) + " of them record a failed emission (position " +
                   std::to_string(first->position) + ": " + first->failure +
                   "): the file certifies no greedy decoding there";
        c.first_failure = Location{"logits/" + name, first->row, -1, -1, first->position, first->token};
      } else if (!c.failed() && fresh.lm_head_mismatch) {
        c.verdict = Verdict::kFail;
        c.reason = "all " + std::to_string(T) + " stored witnesses match the dump, but the run's logits rows are not " +
                   "its lm_head's outputs (" + fresh.lm_head_mismatch_text + "): no interval bounds their margins";
      }
      VerifyEvidence e;
      if (c.first_failure) e.position = c.first_failure->position;
      e.tokens = T;
      e.verified = field_differs ? std::max<Index>(0, checked - 1) : T;
      e.error_source = fresh.model.source;
      e.same_file = same_file;
      c.evidence = std::move(e);
      if (!c.failed()) {
        c.reason = "all " + std::to_string(T) + " stored witnesses match the dump's rows, tokens and hashes";
        if (same_file == false) c.reason += "; " + other_file + ", but every witnessed row is unchanged";
      }
    }
    if (c.failed() && same_file == false) c.reason += "; " + other_file + ": it was modified, or is another dump";
    report.checks.push_back(std::move(c));
  }
  return report;
}

}  // namespace ncert::certify
