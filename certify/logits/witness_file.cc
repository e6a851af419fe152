#include "certify/logits/witness_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>

#include "certify/io/dump_writer.h"
#include "certify/io/output_file.h"
#include "certify/report/format.h"

namespace ncert::certify {

namespace {

constexpr const char* kSchema = "ncert-witness";

std::vector<std::uint8_t> hex_bytes(const std::string& hex) {
  std::vector<std::uint8_t> b(16, 0);
  for (std::size_t i = 0; i < 16 && 2 * i + 1 < hex.size(); ++i) {
    b[i] = static_cast<std::uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return b;
}

ReaderOptions witness_reader_options(ReaderOptions o) {
  o.schema = kSchema;
  o.extra_root_members = {"witness"};
  o.extra_root_attributes = {"source_dump", "source_xxh3_128"};
  return o;
}

}  // namespace

std::uint8_t stored_class(const Witness& w) { return w.ok ? static_cast<std::uint8_t>(w.cls) : std::uint8_t{255}; }

std::string stored_class_name(std::uint8_t code) {
  if (code == 255) return "failed";
  if (code <= static_cast<std::uint8_t>(WitnessClass::kUnbounded)) {
    return std::string(witness_class_name(static_cast<WitnessClass>(code)));
  }
  return "unknown class code " + std::to_string(code);
}

std::string StoredRun::row_hash(Index t) const {
  static const char* d = "0123456789abcdef";
  std::string s(32, '0');
  const std::uint8_t* b = row_xxh3.data() + t * 16;
  for (std::size_t i = 0; i < 16; ++i) {
    s[2 * i] = d[b[i] >> 4];
    s[2 * i + 1] = d[b[i] & 15];
  }
  return s;
}

namespace {

Status write_witnesses(DumpWriter& w, const DumpModel& dump, const std::string& dump_hash,
                       const std::vector<RunWitnesses>& runs) {
  RootInfo root;
  root.engine = dump.engine;
  root.build = dump.build;
  root.model = dump.model;
  root.device = dump.device;
  NCERT_RETURN_IF_ERROR(w.write_root(root));
  NCERT_RETURN_IF_ERROR(w.write_attr("/", "ncert_schema", std::string(kSchema)));
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
    StoredRun s;
    for (const Witness& x : r.witnesses) {
      s.row.push_back(x.row);
      s.position.push_back(x.position);
      s.token.push_back(x.token);
      s.runner_up.push_back(x.runner_up);
      s.ties.push_back(x.ties);
      s.logit.push_back(x.logit);
      s.runner_up_logit.push_back(x.runner_up_logit);
      s.cls.push_back(stored_class(x));
      const auto h = hex_bytes(x.row_xxh3);
      s.row_xxh3.insert(s.row_xxh3.end(), h.begin(), h.end());
    }
    NCERT_RETURN_IF_ERROR(w.write_dataset(g + "/row", DType::kI64, {T}, s.row.data()));
    NCERT_RETURN_IF_ERROR(w.write_dataset(g + "/position", DType::kI64, {T}, s.position.data()));
    NCERT_RETURN_IF_ERROR(w.write_dataset(g + "/token", DType::kI32, {T}, s.token.data()));
    NCERT_RETURN_IF_ERROR(w.write_dataset(g + "/runner_up", DType::kI32, {T}, s.runner_up.data()));
    NCERT_RETURN_IF_ERROR(w.write_dataset(g + "/ties", DType::kI32, {T}, s.ties.data()));
    NCERT_RETURN_IF_ERROR(w.write_dataset(g + "/logit", DType::kF32, {T}, s.logit.data()));
    NCERT_RETURN_IF_ERROR(w.write_dataset(g + "/runner_up_logit", DType::kF32, {T}, s.runner_up_logit.data()));
    NCERT_RETURN_IF_ERROR(w.write_dataset(g + "/class", DType::kU8, {T}, s.cls.data()));
    NCERT_RETURN_IF_ERROR(w.write_dataset(g + "/row_xxh3", DType::kU8, {T, 16}, s.row_xxh3.data()));
  }
  return w.close();
}

}  // namespace

Status write_witness_file(const std::string& path, bool overwrite, const DumpModel& dump, const std::string& dump_hash,
                          const std::vector<RunWitnesses>& runs) {
  // Written under a temporary name beside the target, which appears whole or not at all: a
  // full disk or an interrupted run must not leave half a file, nor (with --force) have
  // destroyed the witness file that was there.
  struct stat st {};
  if (!overwrite && ::lstat(path.c_str(), &st) == 0) {
    return Status(ErrorCode::kOutputExists, path + ": exists; refusing to overwrite it");
  }
  const std::string temp = temporary_beside(path);
  Status written = [&]() -> Status {
    NCERT_ASSIGN_OR_RETURN(DumpWriter w, DumpWriter::create(temp, true));
    return write_witnesses(w, dump, dump_hash, runs);
  }();
  if (written.ok()) written = move_into_place(temp, path, overwrite, "the witness file");
  ::unlink(temp.c_str());
  return written;
}

WitnessFile::WitnessFile(DumpReader reader, std::string path) : reader_(std::move(reader)), path_(std::move(path)) {
  for (const GroupInfo& g : reader_.model().groups) {
    if (g.path.rfind("/witness/", 0) == 0 && g.path.find('/', 9) == std::string::npos)
      runs_.push_back(g.path.substr(9));
  }
}

Result<WitnessFile> WitnessFile::open(const std::string& path, const ReaderOptions& options) {
  auto reader = DumpReader::open(path, witness_reader_options(options));
  if (!reader.ok()) {
    // What the path is (a FIFO, a file far past its end) is said as for any input; what the
    // file holds is the witness file's own refusal.
    const ErrorCode code = reader.status().code();
    if (code == ErrorCode::kNotRegularFile || code == ErrorCode::kTrailingData) return reader.status();
    return Status(ErrorCode::kWitnessFileInvalid, reader.status().message());
  }
  WitnessFile f(std::move(*reader), path);
  if (f.runs_.empty()) return Status(ErrorCode::kWitnessFileInvalid, path + ": no /witness/<run> groups");
  return f;
}

std::string WitnessFile::source_hash() const {
  for (const AttributeInfo& a : reader_.model().root_attributes) {
    if (a.name == "source_xxh3_128" && a.value.kind == AttrValue::Kind::kString && a.value.strings.size() == 1) {
      return a.value.strings[0];
    }
  }
  return "";
}

Index WitnessFile::stored_tokens(const std::string& run) const {
  const DatasetInfo* d = reader_.model().dataset("/witness/" + run + "/token");
  return d && d->shape.size() == 1 ? d->shape[0] : 0;
}

Result<StoredRun> WitnessFile::read(const std::string& run, Index tokens) const {
  const std::string g = "/witness/" + run;
  auto need = [&](const std::string& ds, DType t, const std::vector<Index>& shape) -> Status {
    const DatasetInfo* d = reader_.model().dataset(g + "/" + ds);
    if (!d || d->dtype != t || d->shape != shape) {
      return Status(ErrorCode::kWitnessFileInvalid, path_ + ": " + g + "/" + ds + " missing or malformed");
    }
    return Status();
  };
  const std::pair<const char*, DType> kColumns[] = {
      {"row", DType::kI64},  {"position", DType::kI64}, {"token", DType::kI32},           {"runner_up", DType::kI32},
      {"ties", DType::kI32}, {"logit", DType::kF32},    {"runner_up_logit", DType::kF32}, {"class", DType::kU8}};
  for (const auto& [ds, t] : kColumns) NCERT_RETURN_IF_ERROR(need(ds, t, {tokens}));
  NCERT_RETURN_IF_ERROR(need("row_xxh3", DType::kU8, {tokens, 16}));
  StoredRun s;
  s.run = run;
  NCERT_ASSIGN_OR_RETURN(s.row, reader_.read_i64(g + "/row"));
  NCERT_ASSIGN_OR_RETURN(s.position, reader_.read_i64(g + "/position"));
  NCERT_ASSIGN_OR_RETURN(s.token, reader_.read_i32(g + "/token"));
  NCERT_ASSIGN_OR_RETURN(s.runner_up, reader_.read_i32(g + "/runner_up"));
  NCERT_ASSIGN_OR_RETURN(s.ties, reader_.read_i32(g + "/ties"));
  NCERT_ASSIGN_OR_RETURN(s.logit, reader_.read_f32(g + "/logit"));
  NCERT_ASSIGN_OR_RETURN(s.runner_up_logit, reader_.read_f32(g + "/runner_up_logit"));
  NCERT_ASSIGN_OR_RETURN(s.cls, reader_.read_u8(g + "/class"));
  NCERT_ASSIGN_OR_RETURN(s.row_xxh3, reader_.read_u8(g + "/row_xxh3"));
  std::string tie_break;
  for (const GroupInfo& gi : reader_.model().groups) {
    if (gi.path != g) continue;
    for (const AttributeInfo& a : gi.attributes) {
      if (a.name == "logit_error") s.logit_error = a.value.as_number();
      if (a.name == "vocab") {
        const std::optional<double> v = a.value.as_number();
        // Out of Index's range (or not a number): no vocabulary, refused below.
        s.vocab = v && *v >= 1 && *v < 0x1p62 ? static_cast<Index>(*v) : 0;
      }
      if (a.name == "tie_break" && a.value.kind == AttrValue::Kind::kString && a.value.strings.size() == 1) {
        tie_break = a.value.strings[0];
      }
    }
  }
  // Values ncert never writes are refused, not re-derived: a negative logit_error made every
  // margin "certified", and another tie rule or vocabulary claims what no witness here
  // establishes (a review's files verified "all 3 stored witnesses match").
  const auto invalid = [&](const std::string& what) {
    return Status(ErrorCode::kWitnessFileInvalid, path_ + ": " + g + " " + what + ": not a witness file ncert wrote");
  };
  if (s.logit_error && !(std::isfinite(*s.logit_error) && *s.logit_error >= 0)) {
    return invalid("logit_error = " + format_float(*s.logit_error) + " (an error bound is finite and at least 0)");
  }
  if (tie_break != "lowest") return invalid("tie_break \"" + tie_break + "\" (ncert breaks ties to the lowest id)");
  if (s.vocab < 1) return invalid("vocab = " + std::to_string(s.vocab));
  for (Index t = 0; t < tokens; ++t) {
    const std::int64_t row = s.row[static_cast<std::size_t>(t)];
    if (row < 0) return invalid("row[" + std::to_string(t) + "] = " + std::to_string(row));
  }
  return s;
}

}  // namespace ncert::certify
