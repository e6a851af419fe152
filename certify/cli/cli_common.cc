#include "certify/cli/cli_common.h"

#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>

namespace ncert::cli {

void add_common_options(CLI::App* cmd, CommonOptions* o) {
  cmd->add_option("--json", o->json_path, "Write the JSON report to PATH ('-' for stdout)")
      ->type_name("PATH");
  cmd->add_option("--threads", o->threads, "Worker threads (default: OMP_NUM_THREADS or all cores)")
      ->check(CLI::Range(1, 1024))
      ->type_name("N");
  cmd->add_flag("--quiet", o->quiet, "Print only failures and the verdict");
  cmd->add_option("--max-memory", o->max_memory,
                  "Largest dataset read whole, in bytes (default 8 GiB); larger ones are refused")
      ->check(CLI::Range(std::uint64_t{1} << 20, std::uint64_t{1} << 50))
      ->type_name("BYTES");
}

void add_logit_error_options(CLI::App* cmd, LogitErrorOptions* o, const char* logit_error_help) {
  cmd->add_option("--logit-error", o->logit_error, logit_error_help)->check(CLI::Range(0.0, 1e30))->type_name("ABS");
  cmd->add_option("--lambda", o->lambda, "Probabilistic tier multiplier of reference bounds (default 10)")
      ->check(CLI::Range(1.0, 1000.0));
}

void add_require_option(CLI::App* cmd, std::string* text) {
  const CLI::Validator kinds(
      [](const std::string& s) {
        auto r = certify::parse_requirement(s);
        return r.ok() ? std::string() : r.status().message();
      },
      "all|KIND[,KIND...]");
  cmd->add_option("--require", *text,
                  "Fail when a check of these kinds is skipped: 'all', or kinds such as untouched,walk")
      ->check(kinds)
      ->type_name("KINDS");
}

certify::Requirement requirement(const std::string& text) {
  return text.empty() ? certify::Requirement{} : *certify::parse_requirement(text);
}

void add_pair_option(CLI::App* cmd, std::vector<std::string>* pairs) {
  const CLI::Validator run_pair(
      [](const std::string& p) {
        const auto colon = p.find(':');
        return colon == std::string::npos || colon == 0 || colon + 1 == p.size() ? "expected a:b, got " + p
                                                                                   : std::string();
      },
      "a:b");
  cmd->add_option("--pair", *pairs, "Pair run a of A with run b of B (repeatable)")->check(run_pair)->type_name("a:b");
}

std::vector<std::pair<std::string, std::string>> split_pairs(const std::vector<std::string>& pairs) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& p : pairs) {
    const auto colon = p.find(':');
    out.emplace_back(p.substr(0, colon), p.substr(colon + 1));
  }
  return out;
}

void apply_threads(const CommonOptions& o) {
  omp_set_dynamic(0);
  if (o.threads > 0) omp_set_num_threads(o.threads);
}

namespace {
bool write_json(const certify::Report& report, const std::string& path) {
  const std::string text = report.to_json().dump(2) + "\n";
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return true;
  }
  // Write beside the target, then rename: a reader never sees half a report.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out << text;
    if (!out.flush()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}
}  // namespace

int emit(const Result<certify::Report>& result, const CommonOptions& o) {
  if (!result.ok()) {
    std::fprintf(stderr, "ncert: %s\n", result.status().to_string().c_str());
    return exit_code_for(result.status().code());
  }
  const certify::Report& report = *result;
  if (o.json_path != "-") {
    const std::string text = report.to_text(o.quiet);
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
  if (!o.json_path.empty() && !write_json(report, o.json_path)) {
    std::fprintf(stderr, "ncert: error io (200): cannot write the JSON report to %s\n",
                 o.json_path.c_str());
    return exit_code_for(ErrorCode::kIo);
  }
  std::fflush(stdout);
  return report.exit_code();
}

}  // namespace ncert::cli
