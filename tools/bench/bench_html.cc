// Benchmark of the HTML report (`--html`) on the 2,048-row compare of bench_logits: two dumps of
// R x V f32 logits (default 2048 x 151,936, 1.24 GB each, the files bench_logits writes and
// reuses in the same DIR), warm page cache. Three figures:
//   1. the real binary end to end, `ncert compare A B --json J` against the same with
//      `--html H` added, run alternately (with, without, with, ...) so the machine's drift hits
//      both alike; the ratio of the medians is the cost the flag adds;
//   2. the page's size;
//   3. in this process, the comparison (run_compare) against rendering its report as HTML and
//      JUnit (render_html, render_junit), each timed alone.
// Usage: bench_html DIR [--rows R] [--vocab V] [--threads T] [--reps N]
#include <omp.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "certify/commands/compare.h"
#include "certify/report/render_html.h"
#include "certify/report/render_junit.h"
#include "fixtures/logits.h"
#include "tools/bench/bench_common.h"

namespace {

using namespace ncert;

void warm(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buf(8 << 20);
  while (in.read(buf.data(), static_cast<std::streamsize>(buf.size()))) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Benchmark of the HTML report (`ncert compare --html`) on bench_logits' R x V f32 logits pair: the cost the "
      "flag adds end to end, the page's size, and rendering against the comparison in process"};
  std::string dir;
  Index rows = 2048, vocab = 151936;
  int threads = 2, reps = 5;
  app.add_option("DIR", dir, "Holds the pair (bench_logits' \"full\" pair: written on the first run, reused after)")
      ->required();
  app.add_option("--rows", rows, "Rows of the pair")->check(bench::at_least(1));
  app.add_option("--vocab", vocab, "Logits per row")->check(bench::at_least(1));
  app.add_option("--threads", threads, "Threads of ncert compare and of the in-process comparison")
      ->check(bench::at_least(1));
  app.add_option("--reps", reps, "Runs with and without --html each (alternating) and renderings; times are medians")
      ->check(bench::at_least(1));
  if (const std::optional<int> rc = bench::parse_command_line(app, argc, argv)) return *rc;
  omp_set_dynamic(0);
  omp_set_num_threads(threads);
  std::filesystem::create_directories(dir);
  // bench_logits' "full" pair: generated once, shared by both benchmarks.
  const std::string stem = dir + "/full-" + std::to_string(rows) + "x" + std::to_string(vocab);
  const std::string a = stem + "-a.h5", b = stem + "-b.h5";
  if (!std::filesystem::exists(a) || !std::filesystem::exists(b)) {
    fixtures::LogitsPairSpec spec;
    spec.tokens = rows;
    spec.vocab = vocab;
    const double t0 = bench::now_seconds();
    if (const Status st = fixtures::write_logits_pair(a, b, spec, true); !st.ok()) {
      std::fprintf(stderr, "%s\n", st.to_string().c_str());
      return 1;
    }
    std::printf("generated the pair (%ld rows) in %.1f s\n", (long)rows, bench::now_seconds() - t0);
  }
  warm(a);
  warm(b);
  std::printf("bench_html: %ld rows x %ld vocab, threads %d, %d runs each, alternating\n", (long)rows, (long)vocab,
              threads, reps);

  // 1. End to end: the binary with and without --html, alternately.
  const std::string t = std::to_string(threads);
  const std::vector<std::string> base = {NCERT_BINARY, "compare",   a, b,        "--matched-history",     "--policy",
                                         "kl:1",       "--threads", t, "--json", dir + "/bench-html.json"};
  std::vector<std::string> with_html = base;
  with_html.insert(with_html.end(), {"--html", dir + "/bench-html.html"});
  std::vector<double> plain, html;
  bench::run_seconds(base, true);  // one unmeasured run: the first touches the binary's pages
  for (int r = 0; r < reps; ++r) {
    const double x = bench::run_seconds(r % 2 ? base : with_html, true);
    const double y = bench::run_seconds(r % 2 ? with_html : base, true);
    if (x < 0 || y < 0) {
      std::fprintf(stderr, "ncert compare failed\n");
      return 1;
    }
    (r % 2 ? plain : html).push_back(x);
    (r % 2 ? html : plain).push_back(y);
  }
  const double m_plain = bench::median(plain), m_html = bench::median(html);
  const auto page_bytes = std::filesystem::file_size(dir + "/bench-html.html");
  std::printf("  ncert compare            median %.3f s\n", m_plain);
  std::printf("  ncert compare --html     median %.3f s   ratio %.3f (%+.1f %%)\n", m_html, m_html / m_plain,
              100 * (m_html / m_plain - 1));
  std::printf("  HTML page                %.1f KiB\n", static_cast<double>(page_bytes) / 1024);

  // 3. In process: the comparison, then rendering its report.
  certify::CompareOptions o;
  o.a = a;
  o.b = b;
  o.matched_history = true;
  o.policy = *certify::parse_policy("kl:1");
  double t0 = bench::now_seconds();
  auto report = certify::run_compare(o);
  const double compare_s = bench::now_seconds() - t0;
  if (!report.ok()) {
    std::fprintf(stderr, "%s\n", report.status().to_string().c_str());
    return 1;
  }
  std::vector<double> render_html_s, render_junit_s;
  std::size_t html_bytes = 0, junit_bytes = 0;
  for (int r = 0; r < reps; ++r) {
    t0 = bench::now_seconds();
    html_bytes = certify::render_html(*report).size();
    render_html_s.push_back(bench::now_seconds() - t0);
    t0 = bench::now_seconds();
    junit_bytes = certify::render_junit(*report).size();
    render_junit_s.push_back(bench::now_seconds() - t0);
  }
  std::printf("  in process: run_compare %.3f s; render_html %.2f ms (%zu bytes); render_junit %.2f ms (%zu bytes)\n",
              compare_s, 1e3 * bench::median(render_html_s), html_bytes, 1e3 * bench::median(render_junit_s),
              junit_bytes);
  return 0;
}
