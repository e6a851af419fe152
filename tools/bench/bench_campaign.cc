// Benchmark of `ncert campaign`: a campaign of 64 projections (16 step dumps x 4 projections,
// qwen-mixer shapes reduced 4x: in 128 x 1280 -> 4096, out 128 x 4096 -> 1280, AF4 + bf16) run
// on local processes (1 and 2 workers x 1 and 2 threads) and, when mpirun is found, on 1 and 2
// worker ranks (mpirun -n 2 and -n 3: rank 0 schedules). Reports wall time, parallel efficiency
// against one worker with one thread, and the cost model's constants (reference seconds per
// M*N*K, read seconds per byte, fixed seconds per item) fitted from the campaign's own report.
// With --shared-weights: full step dumps against weights-omitted ones plus a weights dump.
// Usage: bench_campaign DIR NCERT [--generate] [--repeat R] [--shared-weights]
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
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
      const std::uint64_t seed = 1000 * static_cast<std::uint64_t>(d) + 10 * static_cast<std::uint64_t>(l);
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

// --shared-weights: the same campaign shape with the weights every step shares (one seed per
// projection, activations scaled per step), written twice: in full, and with the weights
// omitted (weights_xxh3 declared, docs/dump-format.md §4.5) plus one weights dump (the first
// step in full, declaring its hashes). The omitted copies are made with h5py and the Python
// writer's XXH3 (ncert_dump.weights_hash), from the full dumps' own datasets.
constexpr const char* kOmitScript = R"PY(
import sys, h5py
from ncert_dump.weights_hash import Xxh3_128
def weights_hash(p):
    h = Xxh3_128()
    h.update(f"ncert-weights-v1\nk={int(p.attrs['k'])}\nn={int(p.attrs['n'])}\n".encode())
    segs = p["weight"]
    for name in sorted(segs, key=lambda s: (int(segs[s].attrs["row_begin"]), s)):
        g = segs[name]; a = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in g.attrs.items()}
        h.update(f"segment {len(name.encode())} {name}\n".encode())
        keys, members = ["format", "row_begin", "row_end"], ["values"]
        if a["format"] == "af4":
            keys += ["group_size", "variant"] + (["codebook"] if a["variant"] == "codebook" else [])
            keys += ["packing", "dequant", "dequant_op"]
            members = ["codes", "scales"] + (["biases"] if a["variant"] == "affine" else [])
            members += ["codebook"] if a.get("codebook") == "custom" else []
        for k in keys:
            h.update(f"{k}={a.get(k, {'dequant': 'exact', 'dequant_op': 'either'}.get(k))}\n".encode())
        for m in members:
            d = g[m]; t = d.attrs.get("dtype", None)
            t = t.decode() if isinstance(t, bytes) else t
            t = t or {"uint32": "u32", "uint8": "u8", "float32": "f32", "float16": "f16"}[d.dtype.name]
            h.update(f"{m} {t} {' '.join(str(e) for e in d.shape)}\n".encode() + d[()].tobytes())
    return h.hexdigest()
weights, rest = sys.argv[1], sys.argv[2:]
with h5py.File(weights, "r+") as f:
    for p in f["projections"].values(): p.attrs["weights_xxh3"] = weights_hash(p)
for full in rest:
    with h5py.File(full, "r") as src, h5py.File(full.replace("full-", "omit-"), "w") as dst:
        for k, v in src.attrs.items(): dst.attrs[k] = v
        for name, p in src["projections"].items():
            q = dst.create_group("projections/" + name)
            for k, v in p.attrs.items(): q.attrs[k] = v
            q.attrs["weights_xxh3"] = weights_hash(p)
            for m in p:
                if m != "weight": src.copy(p[m], q, name=m)
)PY";

Status generate_shared(const std::string& dir, const std::string& python_path) {
  std::filesystem::create_directories(dir);
  Json full = Json::array(), omit = Json::array();
  std::string files;
  for (int d = 0; d < kDumps; ++d) {
    fixtures::DumpSpec spec;
    spec.root.engine = "ncert-bench";
    spec.root.build = "campaign";
    for (int l = 0; l < 2; ++l) {
      const std::uint64_t seed = 10 * static_cast<std::uint64_t>(l);
      spec.projections.push_back(projection("layer" + std::to_string(l) + "_in_proj", 1280, 4096, seed + 1));
      spec.projections.push_back(projection("layer" + std::to_string(l) + "_out_proj", 4096, 1280, seed + 2));
    }
    // Another step: other activations (x is drawn first, so the weights stay the same).
    for (auto& p : spec.projections) p.x_scale = 1.0f + 0.0625f * static_cast<float>(d);
    char name[32];
    std::snprintf(name, sizeof name, "full-%03d.h5", d);
    NCERT_RETURN_IF_ERROR(fixtures::write_dump(dir + "/" + name, spec, {}, true));
    if (d == 0) NCERT_RETURN_IF_ERROR(fixtures::write_dump(dir + "/weights.h5", spec, {}, true));
    files += " " + dir + "/" + name;
    full.push_back(Json{{"id", std::string(name + 5, 3)}, {"check", name}});
    omit.push_back(Json{{"id", std::string(name + 5, 3)}, {"check", "omit-" + std::string(name + 5)}});
  }
  std::ofstream(dir + "/omit.py") << kOmitScript;
  const std::string cmd =
      "PYTHONPATH=" + python_path + " /usr/bin/python3 " + dir + "/omit.py " + dir + "/weights.h5" + files;
  if (std::system(cmd.c_str()) != 0) return Status(ErrorCode::kInternal, "failed: " + cmd);
  std::ofstream(dir + "/full.json") << Json{{"ncert_campaign", 1}, {"name", "full"}, {"entries", full}}.dump(1);
  std::ofstream(dir + "/omit.json")
      << Json{{"ncert_campaign", 1}, {"name", "omit"}, {"weights", "weights.h5"}, {"entries", omit}}.dump(1);
  return Status();
}

/// Full step dumps against weights-omitted ones with a weights dump, side by side.
int bench_shared(const std::string& dir, const std::string& ncert, int repeat) {
  const std::string python_path = std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "python";
  if (!std::filesystem::exists(dir + "/omit.json")) {
    if (Status s = generate_shared(dir, python_path); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.to_string().c_str());
      return 1;
    }
  }
  auto bytes_of = [&](const char* prefix) {
    double b = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().filename().string().rfind(prefix, 0) == 0) b += static_cast<double>(e.file_size());
    }
    return b;
  };
  std::printf(
      "shared weights: %d steps x 4 projections; step dumps %.1f MB in full, %.1f MB without weights, "
      "weights dump %.1f MB\n",
      kDumps, bytes_of("full-") / 1e6, bytes_of("omit-") / 1e6, bytes_of("weights.h5") / 1e6);
  // Full and omitted runs alternate (the order swapped every repetition), so a change in the
  // shared machine's load falls on both.
  for (const char* shape : {"--workers 1 --threads 2", "--workers 2 --threads 1"}) {
    std::vector<double> t[2];
    double read[2] = {0, 0};
    const char* kinds[2] = {"full", "omit"};
    for (int i = 0; i < repeat; ++i) {
      for (int order = 0; order < 2; ++order) {
        const int k = (i % 2 == 0) ? order : 1 - order;
        const std::string kind = kinds[k];
        const std::string journal = dir + "/" + kind + ".journal", report = dir + "/" + kind + "-report.json";
        std::filesystem::remove(journal);
        const std::string cmd = ncert + " campaign " + dir + "/" + kind + ".json " + shape + " --journal " + journal +
                                " --json " + report + " --quiet >/dev/null 2>&1";
        const double t0 = bench::now_seconds();
        if (std::system(cmd.c_str()) != 0) {
          std::fprintf(stderr, "failed: %s\n", cmd.c_str());
          return 1;
        }
        t[k].push_back(bench::now_seconds() - t0);
        std::ifstream in(report);
        const Json j = Json::parse(in);
        read[k] = 0;
        for (const Json& e : j["entries"]) read[k] += e["report"]["stats"]["timing_read_seconds"].get<double>();
      }
    }
    for (int k = 0; k < 2; ++k) {
      std::printf("  %-26s %-5s %7.2f s   read (projection items, summed) %.3f s\n", shape, kinds[k],
                  bench::median(t[k]), read[k]);
    }
    std::printf("  %-26s omit / full %.3f\n", shape, bench::median(t[1]) / bench::median(t[0]));
  }
  return 0;
}

struct Run {
  std::string label;
  std::string command;
  int cores = 1;  ///< worker processes x threads: what the efficiency is relative to
  double seconds = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Benchmark of `ncert campaign` (16 step dumps x 4 projections) on local workers and MPI ranks: wall time, "
      "parallel efficiency and the cost model's constants"};
  std::string dir, ncert;
  bool gen = false, shared = false;
  int repeat = 1;
  app.add_option("DIR", dir, "Holds the generated dumps and the campaign's manifest, journal and report")->required();
  app.add_option("NCERT", ncert, "The ncert binary run")->required();
  app.add_flag("--generate", gen, "Write the dumps even if DIR/campaign.json exists (always when it does not)");
  app.add_option("--repeat", repeat, "Runs of each configuration; times are their medians")->check(bench::at_least(1));
  app.add_flag("--shared-weights", shared,
               "Instead: full step dumps against weights-omitted ones plus a weights dump (generated once)");
  if (const std::optional<int> rc = bench::parse_command_line(app, argc, argv)) return *rc;
  if (shared) return bench_shared(dir, ncert, repeat);
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
  std::vector<Run> runs = {{"local 1 worker x 1 thread", "", 1},
                           {"local 1 worker x 2 threads", "", 2},
                           {"local 2 workers x 1 thread", "", 2},
                           {"local 2 workers x 2 threads", "", 4}};
  runs[0].command = ncert + " campaign " + manifest + " --workers 1 --threads 1";
  runs[1].command = ncert + " campaign " + manifest + " --workers 1 --threads 2";
  runs[2].command = ncert + " campaign " + manifest + " --workers 2 --threads 1";
  runs[3].command = ncert + " campaign " + manifest + " --workers 2 --threads 2";
  if (mpi) {
    const std::string env = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ";
    runs.push_back({"mpi 1 rank x 1 thread",
                    env + "mpirun -n 2 --oversubscribe " + ncert + " campaign " + manifest + " --threads 1", 1});
    runs.push_back({"mpi 2 ranks x 1 thread",
                    env + "mpirun -n 3 --oversubscribe " + ncert + " campaign " + manifest + " --threads 1", 2});
    runs.push_back({"mpi 1 rank x 2 threads",
                    env + "mpirun -n 2 --oversubscribe " + ncert + " campaign " + manifest + " --threads 2", 2});
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
  if (std::system(
          (runs[0].command + " --journal " + journal + " --json " + report + " --quiet >/dev/null 2>&1").c_str()) != 0)
    return 1;
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
  std::printf(
      "cost model (1 worker x 1 thread, %.2f s): reference %.3g s per M*N*K, read %.3g s per byte, "
      "%.3g s fixed per item (%d items: process, open, plan, hash, assembly)\n",
      base_wall, ref / mnk, read / bytes, fixed, items);
  return 0;
}
