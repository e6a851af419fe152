// Benchmark of `ncert check` on a qwen-mixer dump (issue 5): 4 layers = 8 projections
// (in_proj 128 x 5120 -> 16480 of 16640, out_proj 128 x 16480 of 16640 -> 5120). Reports wall
// time, the share spent in HDF5 reads, reference and comparisons, and peak RSS; then, in the
// same process, times the bare reference on each shape (the issue-3 benchmark's computation)
// and reports check time per projection / reference time for its shape (target <= 1.5):
// --reps rounds of one check and the bare references, alternated, and the ratio of the medians
// (one round's ratio ranged 1.26-1.70 on one machine within minutes). The
// reader's rate over every dataset is set against what `cat FILE > /dev/null` reaches on the
// same file from the page cache (read(2) in 1 MiB blocks, interleaved with the reads).
// Usage: bench_check DUMP.h5 [--threads T] [--reps N] [--generate [--round-to-nearest]]
//   --generate writes the dump first (takes a minute) if it does not exist.
//   --round-to-nearest generates it with every accumulator f32-rn: the preset's rz and
//   matrix-unit projections are where the residual tests do not apply (a SKIP, nothing
//   computed), so their cost is measured where they run on all 8 projections.
#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "certify/commands/check.h"
#include "certify/io/dump_reader.h"
#include "certify/io/hash.h"
#include "certify/projection/projection_data.h"
#include "fixtures/generator.h"
#include "reference/linear.h"
#include "tools/bench/bench_common.h"

namespace {

using namespace ncert;

/// Seconds `cat path > /dev/null` takes: the whole file through read(2) in 1 MiB blocks.
double cat_seconds(const std::string& path) {
  std::vector<char> buf(std::size_t{1} << 20);
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return 0;
  const double t0 = bench::now_seconds();
  while (::read(fd, buf.data(), buf.size()) > 0) {
  }
  const double t = bench::now_seconds() - t0;
  ::close(fd);
  return t;
}

class NullSink final : public reference::ReferenceSink {
 public:
  void consume(const reference::ReferenceBlock& b) override {
    double s = 0;
    for (Index i = 0; i < b.rows * b.width(); i += 97) s += b.accept[i].hi;
#pragma omp atomic
    sum += s;
  }
  double sum = 0;
};

}  // namespace

/// The reading figures: every dataset through the reader, mapped and read into memory.
void report_reading(const std::string& path) {
  // 1a. Reading: every dataset of the dump through the reader (DumpReader::read_bytes, what
  // check's loads call), against `cat` on the same file from the page cache. check's own
  // "HDF5 reads" above also holds the weights' decoding and hash verification. Large contiguous
  // datasets are mapped, not copied (ReaderOptions::data_mapped), so a read costs little until
  // the bytes are touched: the second figure also hashes every byte read (one pass, as check's
  // weight-hash verification makes), against cat alone; the third reads them into memory.
  struct Rates {
    double read = 0, read_hash = 0;
  };
  auto measure = [&](const certify::ReaderOptions& options, std::vector<double>& cat) {
    auto r = certify::DumpReader::open(path, options);
    double bytes = 0;
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().to_string().c_str());
      std::exit(1);
    }
    std::vector<double> reads, hashed;
    for (int rep = 0; rep < 3; ++rep) {
      for (int hash = 0; hash < 2; ++hash) {
        bytes = 0;
        const double r0 = bench::now_seconds();
        for (const certify::DatasetInfo& d : r->model().datasets) {
          auto v = r->read_bytes(d.path);
          if (!v.ok()) continue;
          bytes += static_cast<double>(v->size());
          if (hash) {
            const certify::Bytes& b = *v;  // read, never written: a mapping stays read-only
            certify::Xxh3Stream h;
            h.update(b.data(), b.size());
            (void)h.hex();
          }
        }
        (hash ? hashed : reads).push_back(bench::now_seconds() - r0);
      }
      cat.push_back(cat_seconds(path));
    }
    return std::pair<Rates, double>{{bytes / bench::median(reads) * 1e-9, bytes / bench::median(hashed) * 1e-9}, bytes};
  };
  std::vector<double> cat;
  certify::ReaderOptions copied;
  copied.data_mapped = false;
  const auto [mapped, bytes] = measure({}, cat);
  const Rates in_memory = measure(copied, cat).first;
  const double file = static_cast<double>(std::filesystem::file_size(path));
  const double cat_rate = file / bench::median(cat) * 1e-9;
  std::printf("  reading every dataset (%.0f MiB); cat from the page cache %.2f GB/s (target >= 0.8 x cat):\n",
              bytes / (1 << 20), cat_rate);
  std::printf("    mapped (the default)   read %6.2f GB/s = %.2f x cat; read and hashed %6.2f GB/s = %.2f x cat\n",
              mapped.read, mapped.read / cat_rate, mapped.read_hash, mapped.read_hash / cat_rate);
  std::printf("    read into memory       read %6.2f GB/s = %.2f x cat; read and hashed %6.2f GB/s = %.2f x cat\n",
              in_memory.read, in_memory.read / cat_rate, in_memory.read_hash, in_memory.read_hash / cat_rate);
}

/// Rounds of one check and every shape's bare reference, so both meet the machine in the same
/// phase; prints the medians and check time per projection / bare reference time per projection.
void check_against_bare_reference(const std::string& path, const certify::CheckCommandOptions& co, int reps) {
  auto reader = certify::DumpReader::open(path);
  std::map<std::string, int> count;  // shape key -> projections of that shape
  std::map<std::string, const certify::ProjectionInfo*> first;
  for (const auto& p : reader->model().projections) {
    const std::string key = std::to_string(p.m) + "x" + std::to_string(p.k) + "x" + std::to_string(p.n) +
                            (p.segments.size() > 2 ? " (in_proj)" : " (out_proj)");
    if (count[key]++ == 0) first[key] = &p;
  }
  // Each shape's projection read once; every round evaluates its problem again.
  std::map<std::string, certify::LoadedProjection> loaded;
  for (const auto& [key, info] : first) loaded.emplace(key, certify::load_projection(*reader, *info).value());
  std::map<std::string, std::vector<double>> bare;  // shape key -> seconds per round
  std::vector<double> checks, bare_totals, ratios;
  reference::ReferenceOptions ro;
  ro.emulate_walk = false;
  for (int r = 0; r < reps; ++r) {
    const double t1 = bench::now_seconds();
    (void)certify::run_check(co);
    checks.push_back(bench::now_seconds() - t1);
    double total = 0;
    for (const auto& [key, L] : loaded) {
      NullSink sink;
      const auto problem = L.problem(10.0);
      const double r0 = bench::now_seconds();
      (void)reference::evaluate_reference(problem, sink, ro);
      const double seconds = bench::now_seconds() - r0;
      bare[key].push_back(seconds);
      total += seconds * count[key];
    }
    bare_totals.push_back(total);
    ratios.push_back(checks.back() / total);
  }
  for (const auto& [k, s] : bare) {
    std::printf("  bare reference %-26s %.2f s median (x%d projections)\n", k.c_str(), bench::median(s), count[k]);
  }
  std::printf("  check %.2f s median of %d\n", bench::median(checks), reps);
  std::printf(
      "  check time per projection / bare reference time per projection: %.2f, medians of %d alternated rounds "
      "(per round %.2f..%.2f; target <= 1.5)\n",
      bench::median(checks) / bench::median(bare_totals), reps, *std::min_element(ratios.begin(), ratios.end()),
      *std::max_element(ratios.begin(), ratios.end()));
}

int main(int argc, char** argv) {
  CLI::App app{
      "Benchmark of `ncert check` on a qwen-mixer dump (4 layers, 8 projections): time per projection against the "
      "bare reference of its shape, and the reader's rate against `cat FILE > /dev/null`"};
  std::string path;
  int threads = omp_get_max_threads();
  bool generate = false;
  bool round_to_nearest = false;
  bool reading_only = false;
  int reps = 3;
  app.add_option("DUMP.h5", path, "The dump checked")->required();
  app.add_option("--threads", threads, "Threads of the check and the reference (default: OpenMP's)")
      ->check(bench::at_least(1));
  app.add_option("--reps", reps, "Rounds of check and bare references, alternated; medians (default 3)")
      ->check(bench::at_least(1));
  app.add_flag("--generate", generate, "Write DUMP.h5 first (takes a minute) if it does not exist");
  app.add_flag("--round-to-nearest", round_to_nearest,
               "With --generate: every accumulator f32-rn, so the residual tests run (and are timed) on all 8 "
               "projections");
  app.add_flag("--reading-only", reading_only,
               "Only the reading figures (every dataset through the reader against `cat`), not check");
  if (const std::optional<int> rc = bench::parse_command_line(app, argc, argv)) return *rc;
  if (!generate && !std::filesystem::is_regular_file(path)) {
    std::fprintf(stderr, "bench_check: %s is not a file (--generate writes it)\n", path.c_str());
    return 2;
  }
  omp_set_dynamic(0);
  omp_set_num_threads(threads);
  if (generate && !std::filesystem::exists(path)) {
    const double t0 = bench::now_seconds();
    fixtures::DumpSpec spec = fixtures::preset_qwen_mixer(4);
    if (round_to_nearest) {
      for (fixtures::ProjectionSpec& p : spec.projections) {
        p.accumulator = "f32-rn";
        p.engine_order.clear();  // the default split:8:fma, rounded to nearest
      }
    }
    const Status s = fixtures::write_dump(path, spec, {}, false);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.to_string().c_str());
      return 1;
    }
    std::printf("generated %s in %.1f s\n", path.c_str(), bench::now_seconds() - t0);
  }
  std::printf("bench_check: %s, threads=%d, %.0f MiB on disk\n", path.c_str(), threads,
              static_cast<double>(std::filesystem::file_size(path)) / (1 << 20));
  if (reading_only) {
    report_reading(path);
    return 0;
  }

  // 1. ncert check, as the CLI runs it.
  certify::CheckCommandOptions co;
  co.dump = path;
  const double t0 = bench::now_seconds();
  auto report = certify::run_check(co);
  const double wall = bench::now_seconds() - t0;
  const double rss = bench::peak_rss_mib();
  if (!report.ok()) {
    std::fprintf(stderr, "%s\n", report.status().to_string().c_str());
    return 1;
  }
  const auto& st = report->stats;
  const double read = st["timing_read_seconds"].get<double>();
  const double ref = st["timing_reference_seconds"].get<double>();
  const double cmp = st["timing_compare_seconds"].get<double>();
  const double other = st["timing_other_seconds"].get<double>();
  const Index projections = st["projections"].get<Index>();
  std::printf("ncert check: verdict %s, %ld projections, %zu checks\n",
              std::string(certify::verdict_name(report->verdict())).c_str(), (long)projections, report->checks.size());
  std::printf(
      "  wall %.2f s = HDF5 reads %.2f (%.0f%%) + reference %.2f (%.0f%%, of which comparisons %.2f) "
      "+ identity/untouched %.2f + hashing and rest %.2f\n",
      wall, read, 100 * read / wall, ref, 100 * ref / wall, cmp, other, wall - read - ref - other);
  std::printf("  peak RSS %.0f MiB\n", rss);
  report_reading(path);

  // 1b. The cost of the residual tests (signature's tile dots and filters, variance): the same
  // check without them, then with them again, side by side.
  certify::CheckCommandOptions off = co;
  off.check.reference.residual_tests = false;
  double t1 = bench::now_seconds();
  (void)certify::run_check(off);
  const double wall_off = bench::now_seconds() - t1;
  t1 = bench::now_seconds();
  (void)certify::run_check(co);
  const double wall_on = std::min(wall, bench::now_seconds() - t1);
  std::printf("  residual tests: check %.2f s with them, %.2f s without: %+.0f%% (target <= 15%%)\n", wall_on, wall_off,
              100 * (wall_on / wall_off - 1));

  // 2. The bare reference per shape, same process, same threads, alternated with check.
  check_against_bare_reference(path, co, reps);
  return 0;
}
