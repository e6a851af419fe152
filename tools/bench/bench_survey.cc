// Benchmark of opening a dump of many small objects: P projections of 1 x 1 (default 24,000:
// 168,000 objects, the hostile-file case of docs/testing.md), written once to DIR/survey-P.h5
// and reused, warm page cache. Two figures, run alternately so the machine's drift hits both:
//   1. DumpReader::open (walk, survey of every object, schema) with one process against the
//      same split over --processes processes: seconds and the ratio;
//   2. the real binary end to end, `ncert check DUMP --only <one projection>` and
//      `ncert inspect DUMP --no-hashes`: seconds, against the 5 s a hostile-looking valid file
//      may take (docs/testing.md).
// Usage: bench_survey DIR [--projections P] [--processes N] [--reps R]

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "certify/io/dump_reader.h"
#include "fixtures/generator.h"
#include "tools/bench/bench_common.h"

namespace {

using namespace ncert;

/// A dump of `count` projections of one row, K = N = 1, unpacked output only.
Status write_many(const std::string& path, int count) {
  fixtures::DumpSpec spec;
  spec.root = {"bench", "survey-" + std::to_string(count), "many", "cpu", 1};
  for (int i = 0; i < count; ++i) {
    fixtures::ProjectionSpec p;
    char name[16];
    std::snprintf(name, sizeof name, "p%05d", i);
    p.name = name;
    p.requests = 1;
    p.block_rows = 1;
    p.cap = 1;
    p.slots = 1;
    p.k = 1;
    p.n = 1;
    p.write_packed = p.write_compact = p.write_before = false;
    p.engine_order = "pairwise";  // the default split:8 walk needs K >= 8
    p.seed = static_cast<std::uint64_t>(i) + 1;
    spec.projections.push_back(std::move(p));
  }
  return fixtures::write_dump(path, spec, {}, true);
}

double open_seconds(const std::string& path, int processes) {
  certify::ReaderOptions o;
  o.survey_processes = processes;
  const double t0 = bench::now_seconds();
  auto r = certify::DumpReader::open(path, o);
  const double t = bench::now_seconds() - t0;
  if (!r.ok()) {
    std::fprintf(stderr, "bench_survey: %s\n", r.status().to_string().c_str());
    return -1;
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Benchmark of opening a dump of many small objects (P projections of 1 x 1): DumpReader::open on one process "
      "against several, and `ncert check --only` / `ncert inspect` end to end"};
  std::string dir;
  int projections = 24000, processes = 2, reps = 3;
  app.add_option("DIR", dir, "Holds the dump, DIR/survey-P.h5 (written on the first run, reused after)")->required();
  app.add_option("--projections", projections, "Projections of 1 x 1 in the dump (7 objects each)")
      ->check(bench::at_least(1));
  app.add_option("--processes", processes, "Processes the survey is split over, against one")
      ->check(bench::at_least(1));
  app.add_option("--reps", reps, "Alternated runs of each figure; times are their medians")->check(bench::at_least(1));
  if (const std::optional<int> rc = bench::parse_command_line(app, argc, argv)) return *rc;
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/survey-" + std::to_string(projections) + ".h5";
  if (!std::filesystem::exists(path)) {
    std::printf("writing %s (%d projections)...\n", path.c_str(), projections);
    if (Status s = write_many(path, projections); !s.ok()) {
      std::fprintf(stderr, "bench_survey: %s\n", s.to_string().c_str());
      return 1;
    }
  }
  std::printf("dump: %s, %d projections, %.1f MB\n", path.c_str(), projections,
              static_cast<double>(std::filesystem::file_size(path)) / 1e6);
  std::vector<double> one, many, check, inspect;
  char only[16];
  std::snprintf(only, sizeof only, "p%05d", projections / 3);
  for (int r = 0; r < reps; ++r) {
    one.push_back(open_seconds(path, 1));
    many.push_back(open_seconds(path, processes));
    check.push_back(bench::run_seconds({NCERT_BINARY, "check", path, "--only", only}));
    inspect.push_back(bench::run_seconds({NCERT_BINARY, "inspect", path, "--no-hashes"}));
  }
  const double t1 = bench::median(one), tn = bench::median(many);
  std::printf("DumpReader::open, 1 process:   %.2f s (median of %d)\n", t1, reps);
  std::printf("DumpReader::open, %d processes: %.2f s; ratio %.2fx\n", processes, tn, t1 / tn);
  std::printf("ncert check --only %s:  %.2f s\n", only, bench::median(check));
  std::printf("ncert inspect --no-hashes:     %.2f s\n", bench::median(inspect));
  return 0;
}
