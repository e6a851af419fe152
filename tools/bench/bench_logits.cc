// Benchmark of `ncert compare` and `ncert witness` on full-vocabulary logits (issue 6): two dumps
// of R x V f32 logits (default 2048 x 151,936, 1.24 GB each), uncompressed, warm page cache, on
// the given threads; a second size (R/4 rows) shows peak RSS does not grow with the number of
// rows; a chunked + deflate pair shows compressed logits work (decompression-bound). Each
// measurement runs the real `ncert` binary as a child process (fork + exec: libgomp is not
// fork-safe without exec), so its time is end to end and its peak RSS its own. Side by side,
// the numpy + h5py baseline (tools/bench/logits_baseline.py) computes the same core statistics.
// Usage: bench_logits DIR [--rows R] [--deflate-rows D] [--vocab V] [--threads T] [--reps N] [--python PATH]
//                     [--no-numpy]
#include <omp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "fixtures/generator.h"
#include "fixtures/logits.h"
#include "tools/bench/bench_common.h"

namespace {

using namespace ncert;

struct Measured {
  double seconds = 0;
  double rss_mib = 0;
  bool ok = false;
};

/// Runs a command as a child process; returns its wall time, peak RSS and success.
Measured run(const std::vector<std::string>& argv_s) {
  std::vector<char*> argv;
  argv.reserve(argv_s.size() + 1);
  for (const std::string& a : argv_s) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);  // or the child's freopen would flush our buffered lines a second time
  const double t0 = bench::now_seconds();
  const pid_t pid = fork();
  if (pid == 0) {
    // Quiet child: its report goes to /dev/null, only the timing matters here.
    freopen("/dev/null", "w", stdout);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  Measured m;
  m.seconds = bench::now_seconds() - t0;
  m.rss_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;
  m.ok = WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 1);
  return m;
}

void warm(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buf(8 << 20);
  while (in.read(buf.data(), static_cast<std::streamsize>(buf.size()))) {
  }
}

double file_gb(const std::string& p) { return static_cast<double>(std::filesystem::file_size(p)) / 1e9; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Benchmark of `ncert compare` and `ncert witness` on full-vocabulary logits (two dumps of R x V f32 logits), "
      "beside the numpy + h5py baseline"};
  std::string dir;
  Index rows = 2048, vocab = 151936, deflate_rows = 0;
  int threads = 2;
  std::string python = "/usr/bin/python3";
  int reps = 3;
  bool skip_numpy = false;
  app.add_option("DIR", dir, "Holds the generated dumps (written on the first run, reused after)")->required();
  app.add_option("--rows", rows, "Rows of the full pair (the quarter pair has R/4)")->check(bench::at_least(1));
  app.add_option("--deflate-rows", deflate_rows, "Rows of the chunked + deflate pair (0: R/4, at least 1)")
      ->check(bench::at_least(0));
  app.add_option("--vocab", vocab, "Logits per row")->check(bench::at_least(1));
  app.add_option("--threads", threads, "Threads of ncert compare and witness")->check(bench::at_least(1));
  app.add_option("--reps", reps, "Alternated compare and witness runs per pair; times are their medians")
      ->check(bench::at_least(1));
  app.add_option("--python", python, "The interpreter of the numpy + h5py baseline");
  app.add_flag("--no-numpy", skip_numpy, "Skip the numpy + h5py baseline");
  if (const std::optional<int> rc = bench::parse_command_line(app, argc, argv)) return *rc;
  omp_set_dynamic(0);
  omp_set_num_threads(threads);
  std::filesystem::create_directories(dir);
  struct Size {
    std::string tag;
    Index rows;
    certify::StorageOptions storage;
  };
  certify::StorageOptions deflate;
  deflate.chunk_rows = 16;
  deflate.deflate = 1;
  deflate.shuffle = true;
  // The deflate pair has as many rows as the quarter pair by default, so its rate is set
  // against an uncompressed compare of the same size: fixed costs (start-up, opening, the
  // files' hashes) weigh more in a smaller run (2026-12-03: 2.30 GB/s at 512 rows, 3.16 at 2048).
  if (deflate_rows <= 0) deflate_rows = std::max<Index>(rows / 4, 1);
  const std::vector<Size> sizes = {{"full", rows, {}}, {"quarter", rows / 4, {}}, {"deflate", deflate_rows, deflate}};
  std::printf("bench_logits: vocab %ld, threads %d, dir %s\n", (long)vocab, threads, dir.c_str());
  std::map<Index, double> plain_rate;  // GB/s of the uncompressed compare, by rows (full, quarter)
  for (const Size& s : sizes) {
    const std::string stem = dir + "/" + s.tag + "-" + std::to_string(s.rows) + "x" + std::to_string(vocab);
    const std::string a = stem + "-a.h5", b = stem + "-b.h5";
    if (!std::filesystem::exists(a) || !std::filesystem::exists(b)) {
      fixtures::LogitsPairSpec spec;
      spec.tokens = s.rows;
      spec.vocab = vocab;
      spec.storage = s.storage;
      const double t0 = bench::now_seconds();
      const Status st = fixtures::write_logits_pair(a, b, spec, true);
      if (!st.ok()) {
        std::fprintf(stderr, "%s\n", st.to_string().c_str());
        return 1;
      }
      std::printf("generated %s pair (%ld rows) in %.1f s\n", s.tag.c_str(), (long)s.rows, bench::now_seconds() - t0);
    }
    warm(a);
    warm(b);
    const double logits_gb = 2.0 * static_cast<double>(s.rows * vocab * 4) / 1e9;
    const std::string t = std::to_string(threads);
    // compare and witness alternate, so a load change on a shared machine moves both; medians.
    Measured cmp, wit;
    std::vector<double> cmp_s, wit_s;
    for (int rep = 0; rep < reps; ++rep) {
      cmp = run({NCERT_BINARY, "compare", a, b, "--matched-history", "--policy", "kl:1", "--threads", t, "--json",
                 dir + "/" + s.tag + "-compare.json"});
      wit = run({NCERT_BINARY, "witness", a, "--threads", t, "--json", dir + "/" + s.tag + "-witness.json"});
      cmp_s.push_back(cmp.seconds);
      wit_s.push_back(wit.seconds);
    }
    cmp.seconds = bench::median(cmp_s);
    wit.seconds = bench::median(wit_s);
    std::printf("%-8s %5ld rows  %.2f GB logits (files %.2f GB)\n", s.tag.c_str(), (long)s.rows, logits_gb,
                file_gb(a) + file_gb(b));
    std::printf("  ncert compare  %7.3f s  %6.2f GB/s  peak RSS %5.0f MiB%s\n", cmp.seconds, logits_gb / cmp.seconds,
                cmp.rss_mib, cmp.ok ? "" : "  (FAILED)");
    std::printf("  ncert witness  %7.3f s  %6.2f GB/s  peak RSS %5.0f MiB%s (one file: %.2f GB)\n", wit.seconds,
                logits_gb / 2 / wit.seconds, wit.rss_mib, wit.ok ? "" : "  (FAILED)", logits_gb / 2);
    // Rates in bytes per second: compare streams both files, witness one.
    std::printf("  compare / witness rate: %.2f (medians of %d alternated runs; target >= 0.75)\n",
                2 * wit.seconds / cmp.seconds, reps);
    if (s.tag != "deflate") plain_rate[s.rows] = logits_gb / cmp.seconds;
    if (s.tag == "deflate") {
      const double rate = logits_gb / cmp.seconds;
      if (plain_rate.count(s.rows)) {
        std::printf("  deflate / uncompressed compare rate, both %ld rows: %.2f (target >= 0.30)\n", (long)s.rows,
                    rate / plain_rate[s.rows]);
      }
      if (s.rows != rows && plain_rate.count(rows)) {
        std::printf("  deflate / uncompressed compare rate of %ld rows: %.2f\n", (long)rows, rate / plain_rate[rows]);
      }
    }
    if (s.tag == "full" && !skip_numpy) {
      const Measured np = run({python, std::string(NCERT_BENCH_DIR) + "/logits_baseline.py", a, b});
      std::printf("  numpy + h5py   %7.3f s  %6.2f GB/s  peak RSS %5.0f MiB%s\n", np.seconds, logits_gb / np.seconds,
                  np.rss_mib, np.ok ? "" : "  (FAILED: is python3-numpy installed?)");
      if (np.ok) std::printf("  compare / numpy speed ratio: %.1fx\n", np.seconds / cmp.seconds);
    }
  }
  return 0;
}
