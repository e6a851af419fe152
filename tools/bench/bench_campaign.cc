// Benchmark of `ncert campaign`: a campaign of 64 projections (16 step dumps x 4 projections,
// qwen-mixer shapes reduced 4x: in 128 x 1280 -> 4096, out 128 x 4096 -> 1280, AF4 + bf16) run
// on local processes (1 and 2 workers x 1 and 2 threads) and, when mpirun is found, on 1 and 2
// worker ranks (mpirun -n 2 and -n 3: rank 0 schedules). Reports wall time, parallel efficiency
// against one worker with one thread, and the cost model's constants (reference seconds per
// M*N*K, read seconds per byte, fixed seconds per item) fitted from the campaign's own report.
// Usage: bench_campaign DIR NCERT [--generate] [--repeat R]
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fixtures/generator.h"
#include "tools/bench/bench_common.h"

namespace {

using namespace ncert;
using Json = nlohmann::json;
constexpr int kDumps = 16;

fixtures::SegmentSpec segment(reference::WeightFormat f, Index rows) {
  fixtures::SegmentSpec s;
  s.format = f;
  s.rows = rows;
  if (f == reference::WeightFormat::kAf4) {
    s.af4.group_size = 64;
    s.af4.scale_dtype = DType::kBf16;
    s.af4.dequant = reference::Dequant::kExact;
  }
  return s;
}

fixtures::ProjectionSpec projection(const std::string& name, Index k, Index n, std::uint64_t seed) {
  fixtures::ProjectionSpec p;
  p.name = name;
  p.requests = 8;
  p.block_rows = 16;
  p.cap = 4;
  p.slots = 32;
  p.k = k;
  p.n = n;
  p.segments = {segment(reference::WeightFormat::kAf4, n * 3 / 4), segment(reference::WeightFormat::kBf16, n / 4)};
  p.x = DType::kBf16;
  p.output = DType::kBf16;
  p.accumulator = "f32-rn";
  p.engine_order = "split:8:fma";
  p.seed = seed;
  return p;
}

Status generate(const std::string& dir) {
  std::filesystem::create_directories(dir);
  Json entries = Json::array();
  for (int d = 0; d < kDumps; ++d) {
    fixtures::DumpSpec spec;
    spec.root.engine = "ncert-bench";
    spec.root.build = "campaign";
    for (int l = 0; l < 2; ++l) {
      const auto seed = static_cast<std::uint64_t>(1000 * d + 10 * l);
      spec.projections.push_back(projection("layer" + std::to_string(l) + "_in_proj", 1280, 4096, seed + 1));
      spec.projections.push_back(projection("layer" + std::to_string(l) + "_out_proj", 4096, 1280, seed + 2));
    }
    char name[32];
    std::snprintf(name, sizeof name, "step-%03d.h5", d);
    NCERT_RETURN_IF_ERROR(fixtures::write_dump(dir + "/" + name, spec, {}, true));
    entries.push_back(Json{{"id", std::string(name, 8)}, {"check", name}});
  }
  std::ofstream(dir + "/campaign.json") << Json{{"ncert_campaign", 1}, {"name", "bench"}, {"entries", entries}}.dump(1);
  return Status();
}

struct Run {
  std::string label;
  std::string command;
  int cores = 1;  ///< worker processes x threads: what the efficiency is relative to
  double seconds = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_campaign DIR NCERT [--generate] [--repeat R]\n");
    return 2;
  }
  const std::string dir = argv[1], ncert = argv[2];
  bool gen = false;
  int repeat = 1;
  for (int i = 3; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--generate")) gen = true;
    if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = std::atoi(argv[++i]);
  }
  if (gen || !std::filesystem::exists(dir + "/campaign.json")) {
    const double t0 = bench::now_seconds();
    if (Status s = generate(dir); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.to_string().c_str());
      return 1;
    }
    std::printf("generated %d dumps x 4 projections in %s (%.1f s)\n", kDumps, dir.c_str(), bench::now_seconds() - t0);
  }
  const std::string manifest = dir + "/campaign.json", journal = dir + "/bench.journal", report = dir + "/report.json";
  const bool mpi = std::system("command -v mpirun >/dev/null 2>&1") == 0;
  std::vector<Run> runs = {
      {"local 1 worker x 1 thread", "", 1}, {"local 1 worker x 2 threads", "", 2},
      {"local 2 workers x 1 thread", "", 2}, {"local 2 workers x 2 threads", "", 4}};
  runs[0].command = ncert + " campaign " + manifest + " --workers 1 --threads 1";
  runs[1].command = ncert + " campaign " + manifest + " --workers 1 --threads 2";
  runs[2].command = ncert + " campaign " + manifest + " --workers 2 --threads 1";
  runs[3].command = ncert + " campaign " + manifest + " --workers 2 --threads 2";
  if (mpi) {
    const std::string env = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ";
    runs.push_back({"mpi 1 rank x 1 thread", env + "mpirun -n 2 --oversubscribe " + ncert + " campaign " + manifest + " --threads 1", 1});
    runs.push_back({"mpi 2 ranks x 1 thread", env + "mpirun -n 3 --oversubscribe " + ncert + " campaign " + manifest + " --threads 1", 2});
    runs.push_back({"mpi 1 rank x 2 threads", env + "mpirun -n 2 --oversubscribe " + ncert + " campaign " + manifest + " --threads 2", 2});
  }
  std::printf("campaign: %d dumps, 64 projections (in 128x1280->4096, out 128x4096->1280), %d core(s) here\n", kDumps,
              omp_get_num_procs());
  for (Run& r : runs) {
    std::vector<double> t;
    for (int i = 0; i < repeat; ++i) {
      std::filesystem::remove(journal);
      const std::string cmd = r.command + " --journal " + journal + " --json " + report + " --quiet >/dev/null 2>&1";
      const double t0 = bench::now_seconds();
      const int rc = std::system(cmd.c_str());
      t.push_back(bench::now_seconds() - t0);
      if (rc != 0) {
        std::fprintf(stderr, "failed (%d): %s\n", rc, cmd.c_str());
        return 1;
      }
    }
    r.seconds = bench::median(t);
  }
  const double base = runs[0].seconds;
  for (const Run& r : runs) {
    std::printf("  %-30s %7.2f s   speed-up %.2f   efficiency %.0f%%\n", r.label.c_str(), r.seconds, base / r.seconds,
                100.0 * base / (r.seconds * r.cores));
  }
  // The cost model's constants, from a one-worker, one-thread run's report (its timings are
  // thread-seconds): reference per M*N*K, reads per byte, and the rest per item.
  std::filesystem::remove(journal);
  const double t_base = bench::now_seconds();
  if (std::system((runs[0].command + " --journal " + journal + " --json " + report + " --quiet >/dev/null 2>&1").c_str()) != 0) return 1;
  const double base_wall = bench::now_seconds() - t_base;
  std::ifstream in(report);
  const Json j = Json::parse(in);
  double ref = 0, read = 0, mnk = 0, bytes = 0;
  int items = j["stats"]["work_items"].get<int>();
  for (const Json& e : j["entries"]) {
    const Json& st = e["report"]["stats"];
    ref += st["timing_reference_seconds"].get<double>();
    read += st["timing_read_seconds"].get<double>();
  }
  for (int d = 0; d < kDumps; ++d) {
    mnk += 2.0 * (128.0 * 1280 * 4096) + 2.0 * (128.0 * 4096 * 1280);
    char name[32];
    std::snprintf(name, sizeof name, "/step-%03d.h5", d);
    bytes += static_cast<double>(std::filesystem::file_size(dir + name));
  }
  const double fixed = (base_wall - ref - read) / items;
  std::printf("cost model (1 worker x 1 thread, %.2f s): reference %.3g s per M*N*K, read %.3g s per byte, "
              "%.3g s fixed per item (%d items: process, open, plan, hash, assembly)\n",
              base_wall, ref / mnk, read / bytes, fixed, items);
  return 0;
}
