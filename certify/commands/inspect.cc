#include "certify/commands/inspect.h"

#include "certify/logits/policy.h"

namespace ncert::certify {

namespace {

std::string shape_text(const std::vector<Index>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Json attributes_json(const std::vector<AttributeInfo>& attrs) {
  Json j = Json::object();
  for (const AttributeInfo& a : attrs) j[a.name] = a.value.render();
  return j;
}

std::string attributes_text(const std::vector<AttributeInfo>& attrs) {
  std::string s;
  for (const AttributeInfo& a : attrs) s += (s.empty() ? "" : ", ") + a.name + "=" + a.value.render();
  return s;
}

/// One dataset as the JSON report's `datasets` entry and the text report's line; its hash when
/// asked for (a read that fails is the report's error, the hash "unreadable").
void describe_dataset(const DumpReader& reader, const DatasetInfo& d, bool hashes, Report& report, Json& datasets) {
  Json dj = Json::object();
  dj["path"] = d.path;
  dj["shape"] = d.shape;
  dj["dtype"] = std::string(dtype_name(d.dtype));
  if (d.tagged_raw)
    dj["storage_type"] =
        std::string(dtype_size(d.dtype) == 2 ? "u16" : "u8") + "+dtype=" + std::string(dtype_name(d.dtype));
  dj["layout"] = std::string(layout_name(d.layout));
  if (!d.chunk.empty()) dj["chunk"] = d.chunk;
  dj["filters"] = d.filters;
  dj["bytes"] = d.bytes;
  std::string hash;
  if (hashes) {
    auto h = reader.dataset_hash(d.path);
    if (!h.ok()) {
      // A read that fails here (checksum, truncated chunk) is a refusal like any other.
      report.error = h.status();
      hash = "unreadable";
    } else {
      hash = *h;
    }
    dj["xxh3_128"] = hash;
  }
  dj["attributes"] = attributes_json(d.attributes);
  datasets.push_back(std::move(dj));
  std::string line = "  dataset " + d.path + "  " + std::string(dtype_name(d.dtype)) + shape_text(d.shape) + "  " +
                     std::string(layout_name(d.layout));
  if (!d.chunk.empty()) line += " chunk" + shape_text(d.chunk);
  for (const std::string& f : d.filters) line += " " + f;
  if (!hash.empty()) line += "  xxh3 " + hash;
  if (!d.attributes.empty()) line += "  {" + attributes_text(d.attributes) + "}";
  report.preamble.push_back(line);
}

/// The schema check: PASS for a valid dump, else FAIL with the first error (the survey's, a
/// tensor's `compare` attribute's, or a failed hash read's), which becomes the report's error.
CheckResult schema_check(const DumpModel& m, const std::vector<Finding>& found, Report& report) {
  const Status first = first_error(found);
  CheckResult schema;
  schema.id = "schema";
  schema.kind = CheckKind::kSchema;
  if (first.ok() && !report.error) {
    schema.verdict = Verdict::kPass;
    schema.reason = "valid ncert dump v" + std::to_string(m.schema_version) + ": " +
                    std::to_string(m.projections.size()) + " projection(s), " + std::to_string(m.logits.size()) +
                    " logits run(s), " + std::to_string(m.tensors.size()) + " tensor(s)";
  } else {
    schema.verdict = Verdict::kFail;
    // Named by file as every other command's refusal is (DumpReader::open): the listing above
    // names it, but a log line or a JSON "error" read alone must too.
    if (!first.ok()) report.error = Status(first.code(), m.file + ": " + first.message());
    schema.reason = report.error->message();
  }
  return schema;
}

}  // namespace

Result<Report> run_inspect(const InspectOptions& options) {
  const std::string& path = options.dump;
  Report report;
  report.command = "inspect";
  report.inputs = describe_inputs({path});
  const InputInfo input = report.inputs.front();

  // A step dump whose projections declare weights_xxh3 and leave their weights to a weights
  // dump (docs/dump-format.md §4.5) is valid as it is: inspect lists it and says so, where it
  // once refused it asking for a --weights option inspect does not take.
  ReaderOptions reader_options = options.reader;
  reader_options.weights_elsewhere = true;
  auto reader = DumpReader::survey(path, reader_options);
  if (!reader.ok()) return report.refuse(reader.status());
  const DumpModel& m = reader->model();
  report.preamble.push_back("dump " + path + "  xxh3_128 " + input.xxh3_128);
  report.preamble.push_back(
      "  engine=" + m.engine + " build=" + m.build + (m.model.empty() ? "" : " model=" + m.model) +
      (m.device.empty() ? "" : " device=" + m.device) + " schema_version=" + std::to_string(m.schema_version));

  Json groups = Json::array();
  for (const GroupInfo& g : m.groups) {
    Json gj = Json::object();  // built in place: an initializer list copies every nested value
    gj["path"] = g.path;
    gj["attributes"] = attributes_json(g.attributes);
    groups.push_back(std::move(gj));
    report.preamble.push_back("  group   " + g.path +
                              (g.attributes.empty() ? "" : "  {" + attributes_text(g.attributes) + "}"));
  }
  Json datasets = Json::array();
  Index total_bytes = 0;
  for (const DatasetInfo& d : m.datasets) {
    describe_dataset(*reader, d, !options.skip_hashes, report, datasets);
    total_bytes += d.bytes;
  }
  // The survey checks each attribute's type; a tensor's `compare` must also parse as a tensor
  // policy, or `ncert compare` refuses the dump (409): inspect says so first.
  std::vector<Finding> found = m.findings;
  for (const TensorInfo& t : m.tensors) {
    if (t.compare.empty()) continue;
    auto policy = tensor_attribute_policy(t);
    if (!policy.ok()) found.push_back({Severity::kError, policy.status().code(), t.path, policy.status().message()});
  }
  Json findings = Json::array();
  for (const Finding& f : found) {
    const bool err = f.severity == Severity::kError;
    findings.push_back({{"severity", err ? "error" : "note"},
                        {"code", err ? std::string(error_name(f.code)) : std::string("note")},
                        {"path", f.path},
                        {"message", f.message}});
    report.preamble.push_back(std::string(err ? "  ERROR " : "  note  ") + f.path + ": " + f.message +
                              (err ? "  [" + std::string(error_name(f.code)) + "]" : ""));
  }
  for (const ProjectionInfo& p : m.projections) {
    if (!p.weights_omitted) continue;
    const std::string message = "weights omitted (weights_xxh3 = " + p.weights_xxh3 + "): `ncert check " + path +
                                " --weights W.h5` reads them from the weights dump";
    findings.push_back({{"severity", "note"}, {"code", "note"}, {"path", p.path}, {"message", message}});
    report.preamble.push_back("  note  " + p.path + ": " + message);
  }
  // ordered_json keeps members in a vector of pair<const string, json>, which copies (not
  // moves) every member when it grows: room first, or each large member is copied deep (1 s on
  // 168,000 objects).
  report.extra.get_ref<Json::object_t&>().reserve(report.extra.size() + 3);
  report.extra["groups"] = std::move(groups);
  report.extra["datasets"] = std::move(datasets);
  report.extra["findings"] = std::move(findings);
  report.stats["datasets"] = m.datasets.size();
  report.stats["bytes"] = total_bytes;
  report.stats["projections"] = m.projections.size();
  report.stats["logits_runs"] = m.logits.size();
  report.stats["tensors"] = m.tensors.size();
  report.stats["errors"] = [&] {
    int n = 0;
    for (const Finding& f : found) n += f.severity == Severity::kError;
    return n;
  }();

  report.checks.push_back(schema_check(m, found, report));
  return report;
}

}  // namespace ncert::certify
