#include "certify/witness_command.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "certify/dump_writer.h"
#include "certify/hash.h"
#include "certify/row_stream.h"
#include "reference/float_bits.h"

namespace ncert::certify {

namespace {

std::vector<std::uint8_t> hex_bytes(const std::string& hex) {
  std::vector<std::uint8_t> b(16, 0);
  for (std::size_t i = 0; i < 16 && 2 * i + 1 < hex.size(); ++i) {
    b[i] = static_cast<std::uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return b;
}

std::string bytes_hex(const std::uint8_t* b) {
  static const char* d = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 16; ++i) {
    s[2 * i] = d[b[i] >> 4];
    s[2 * i + 1] = d[b[i] & 15];
  }
  return s;
}

Status write_witness_file(const std::string& path, bool overwrite, const DumpModel& dump, const std::string& dump_hash,
                          const std::vector<RunWitnesses>& runs) {
  NCERT_ASSIGN_OR_RETURN(DumpWriter w, DumpWriter::create(path, overwrite));
  RootInfo root;
  root.engine = dump.engine;
  root.build = dump.build;
  root.model = dump.model;
  root.device = dump.device;
  NCERT_RETURN_IF_ERROR(w.write_root(root));
  NCERT_RETURN_IF_ERROR(w.write_attr("/", "ncert_schema", std::string("ncert-witness")));
  NCERT_RETURN_IF_ERROR(w.write_attr("/", "source_dump", dump.file));
  NCERT_RETURN_IF_ERROR(w.write_attr("/", "source_xxh3_128", dump_hash));
  for (const RunWitnesses& r : runs) {
    const std::string g = "/witness/" + r.run;
    const Index T = static_cast<Index>(r.witnesses.size());
    NCERT_RETURN_IF_ERROR(w.create_group(g));
    NCERT_RETURN_IF_ERROR(w.write_attr(g, "vocab", r.vocab));
    NCERT_RETURN_IF_ERROR(w.write_attr(g, "tie_break", std::string("lowest")));
    NCERT_RETURN_IF_ERROR(w.write_attr(g, "error_source", r.model.source));
    if (r.model.kind == LogitErrorModel::Kind::kAbsolute) {
      NCERT_RETURN_IF_ERROR(w.write_attr_f64(g, "logit_error", r.model.absolute));
    }
    std::vector<std::int64_t> row, pos;
    std::vector<std::int32_t> tok, ru, ties;
    std::vector<float> logit, rul;
    std::vector<std::uint8_t> cls, hashes;
    for (const Witness& x : r.witnesses) {
      row.push_back(x.row);
      pos.push_back(x.position);
      tok.push_back(x.token);
      ru.push_back(x.runner_up);
      ties.push_back(x.ties);
      logit.push_back(x.logit);
      rul.push_back(x.runner_up_logit);
      cls.push_back(x.ok ? static_cast<std::uint8_t>(x.cls) : std::uint8_t{255});
      const auto h = hex_bytes(x.row_xxh3);
      hashes.insert(hashes.end(), h.begin(), h.end());
    }
    NCERT_RETURN_IF_ERROR(w.write_dataset(g + "/row", DType::kI64, {T}, row.data()));
    NCERT_RETURN_IF_ERROR(w.write_dataset(g + "/position", DType::kI64, {T}, pos.data()));
    NCERT_RETURN_IF_ERROR(w.write_dataset(g + "/token", DType::kI32, {T}, tok.data()));
    NCERT_RETURN_IF_ERROR(w.write_dataset(g + "/runner_up", DType::kI32, {T}, ru.data()));
    NCERT_RETURN_IF_ERROR(w.write_dataset(g + "/ties", DType::kI32, {T}, ties.data()));
    NCERT_RETURN_IF_ERROR(w.write_dataset(g + "/logit", DType::kF32, {T}, logit.data()));
    NCERT_RETURN_IF_ERROR(w.write_dataset(g + "/runner_up_logit", DType::kF32, {T}, rul.data()));
    NCERT_RETURN_IF_ERROR(w.write_dataset(g + "/class", DType::kU8, {T}, cls.data()));
    NCERT_RETURN_IF_ERROR(w.write_dataset(g + "/row_xxh3", DType::kU8, {T, 16}, hashes.data()));
  }
  return w.close();
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
  std::vector<RunWitnesses> runs;
  Json all = Json::object();
  for (const LogitsRunInfo& run : reader->model().logits) {
    if (!o.only.empty() && run.name.find(o.only) == std::string::npos) continue;
    NCERT_ASSIGN_OR_RETURN(LogitErrorModel model, error_model_for(*reader, run, o.logit_error, o.lambda));
    NCERT_ASSIGN_OR_RETURN(RunWitnesses rw, witness_run(*reader, run, std::move(model), hashes.cursor(0)));
    report.checks.push_back(witness_check(rw));
    Json list = Json::array();
    for (const Witness& w : rw.witnesses) list.push_back(witness_json(w));
    all[run.name] = list;
    runs.push_back(std::move(rw));
  }
  report.extra["witnesses"] = all;
  report.stats["runs"] = runs.size();
  report.inputs = hashes.finish();
  const InputInfo input = report.inputs.front();
  if (!o.out.empty()) {
    NCERT_RETURN_IF_ERROR(write_witness_file(o.out, o.overwrite, reader->model(), input.xxh3_128, runs));
    // The JSON summary beside it: the same report, for tools that do not read HDF5.
    const std::string summary = o.out + ".json";
    std::ofstream js(summary, std::ios::trunc);
    js << report.to_json().dump(2) << "\n";
    if (!js.flush()) return Status(ErrorCode::kIo, summary + ": cannot write the JSON summary");
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
  ReaderOptions wopt = o.reader;
  wopt.schema = "ncert-witness";
  auto wf = DumpReader::open(o.witness_file, wopt);
  if (!wf.ok()) {
    return report.refuse(Status(ErrorCode::kWitnessFileInvalid, wf.status().message()));
  }
  auto dump = DumpReader::open(o.dump, o.reader);
  if (!dump.ok()) {
    return report.refuse(dump.status());
  }
  // The stored runs: groups under /witness.
  std::vector<std::string> runs;
  for (const GroupInfo& g : wf->model().groups) {
    if (g.path.rfind("/witness/", 0) == 0 && g.path.find('/', 9) == std::string::npos) runs.push_back(g.path.substr(9));
  }
  if (runs.empty()) {
    report.error = Status(ErrorCode::kWitnessFileInvalid, o.witness_file + ": no /witness/<run> groups");
    return report;
  }
  for (const std::string& name : runs) {
    const std::string g = "/witness/" + name;
    CheckResult c;
    c.id = "logits/" + name + "/witness";
    c.kind = "witness";
    auto fail = [&](const std::string& why, std::int64_t position) {
      c.verdict = Verdict::kFail;
      c.reason = "run " + name + (position >= 0 ? " position " + std::to_string(position) : "") + ": " + why;
      if (position >= 0) c.stats["position"] = position;
    };
    const LogitsRunInfo* run = nullptr;
    for (const LogitsRunInfo& r : dump->model().logits) {
      if (r.name == name) run = &r;
    }
    // Every stored dataset must exist with one entry per token.
    const DatasetInfo* tok_ds = wf->model().dataset(g + "/token");
    if (!run) {
      fail("the dump has no /logits/" + name, -1);
    } else if (!tok_ds || tok_ds->shape.size() != 1 || tok_ds->shape[0] != run->tokens) {
      fail("the witness file holds " + std::to_string(tok_ds ? tok_ds->rows() : 0) + " witnesses, the run " +
               std::to_string(run->tokens) + " tokens",
           -1);
    } else {
      auto need = [&](const std::string& ds, DType t, std::vector<Index> shape) -> Status {
        const DatasetInfo* d = wf->model().dataset(g + "/" + ds);
        if (!d || d->dtype != t || d->shape != shape) {
          return Status(ErrorCode::kWitnessFileInvalid, o.witness_file + ": " + g + "/" + ds + " missing or malformed");
        }
        return Status();
      };
      const Index T = run->tokens;
      for (auto [ds, t] : std::vector<std::pair<std::string, DType>>{{"row", DType::kI64}, {"position", DType::kI64},
                                                                      {"runner_up", DType::kI32}, {"ties", DType::kI32},
                                                                      {"logit", DType::kF32}, {"runner_up_logit", DType::kF32},
                                                                      {"class", DType::kU8}}) {
        if (Status s = need(ds, t, {T}); !s.ok()) {
          report.error = s;
          return report;
        }
      }
      if (Status s = need("row_xxh3", DType::kU8, {T, 16}); !s.ok()) {
        report.error = s;
        return report;
      }
      NCERT_ASSIGN_OR_RETURN(auto pos, wf->read_i64(g + "/position"));
      NCERT_ASSIGN_OR_RETURN(auto tok, wf->read_i32(g + "/token"));
      NCERT_ASSIGN_OR_RETURN(auto ru, wf->read_i32(g + "/runner_up"));
      NCERT_ASSIGN_OR_RETURN(auto ties, wf->read_i32(g + "/ties"));
      NCERT_ASSIGN_OR_RETURN(auto logit, wf->read_f32(g + "/logit"));
      NCERT_ASSIGN_OR_RETURN(auto rul, wf->read_f32(g + "/runner_up_logit"));
      NCERT_ASSIGN_OR_RETURN(auto cls, wf->read_u8(g + "/class"));
      NCERT_ASSIGN_OR_RETURN(auto hashes, wf->read_u8(g + "/row_xxh3"));
      // Re-derive with the error model the witnesses were made with.
      std::optional<double> abs_error;
      for (const GroupInfo& gi : wf->model().groups) {
        if (gi.path != g) continue;
        for (const AttributeInfo& a : gi.attributes) {
          if (a.name == "logit_error") abs_error = std::strtod(a.value.c_str(), nullptr);
        }
      }
      NCERT_ASSIGN_OR_RETURN(LogitErrorModel model, error_model_for(*dump, *run, abs_error, o.lambda));
      NCERT_ASSIGN_OR_RETURN(RunWitnesses fresh, witness_run(*dump, *run, std::move(model)));
      Index checked = 0;
      for (Index t = 0; t < T && c.verdict == Verdict::kPass; ++t) {
        const Witness& w = fresh.witnesses[static_cast<std::size_t>(t)];
        const std::string stored_hash = bytes_hex(hashes.data() + t * 16);
        auto differs = [&](const std::string& field, const std::string& stored, const std::string& now) {
          fail(field + " differs: stored " + stored + ", dump gives " + now, pos[static_cast<std::size_t>(t)]);
        };
        if (stored_hash != w.row_xxh3) {
          differs("row hash", stored_hash, w.row_xxh3 + " (the row was modified)");
        } else if (tok[t] != w.token) {
          differs("token", std::to_string(tok[t]), std::to_string(w.token));
        } else if (reference::f32_bits(logit[t]) != reference::f32_bits(w.logit)) {
          differs("logit", hex_bits_f32(logit[t]), hex_bits_f32(w.logit));
        } else if (ru[t] != w.runner_up || reference::f32_bits(rul[t]) != reference::f32_bits(w.runner_up_logit)) {
          differs("runner-up", std::to_string(ru[t]) + "/" + hex_bits_f32(rul[t]),
                  std::to_string(w.runner_up) + "/" + hex_bits_f32(w.runner_up_logit));
        } else if (ties[t] != w.ties) {
          differs("ties", std::to_string(ties[t]), std::to_string(w.ties));
        } else if (cls[t] != (w.ok ? static_cast<std::uint8_t>(w.cls) : 255)) {
          differs("class", std::to_string(cls[t]), w.ok ? std::string(witness_class_name(w.cls)) : "failure");
        }
        ++checked;
      }
      c.stats["tokens"] = T;  // (fail() may have set "position" already)
      c.stats["verified"] = c.verdict == Verdict::kPass ? T : checked - 1;
      c.stats["error_source"] = fresh.model.source;
      if (c.verdict == Verdict::kPass) {
        c.reason = "all " + std::to_string(T) + " stored witnesses match the dump's rows, tokens and hashes";
      }
    }
    report.checks.push_back(std::move(c));
  }
  return report;
}

}  // namespace ncert::certify
