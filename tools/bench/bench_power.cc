// Detection power of the default `check` (docs/detection.md): each fault class is planted in
// both paths (so identity cannot see it) at a sweep of magnitudes into generated dumps at the
// production shape (K 5120, 8 requests x 4 rows in 32 slots, AF4 groups of 64 beside bf16
// weights), and the smallest magnitude each check catches is printed (column `check`: the whole
// check's verdict, whichever check fails); then the false alarms of every check over
// legitimate dumps (seeds, output types, engine summation orders).
// Column `located`: signature fails and names the planted fault's place (the group's column and
// range for a scale, the row or rows, the column's bias, the affine group's bias); "n/a" where not
// scored.
// Beside the checks, column `changed` counts the stored outputs the fault changed at all (bits
// of y_unpacked differing from the same dump made without it): where it is 0 the dump holds what
// the legitimate one holds (the fault is the engine's, in both paths: the inputs and the packed
// rows are the same), so no check can catch the fault there, and a handful of changed values is
// all the evidence any check has.
// Usage: bench_power [--n N] [--legit L] [--seeds S] [--only TEXT] [--dir D] [--threads T] [--keep]
//   --n      output columns (default 16480, the production in_proj; 4096 runs 4x faster)
//   --legit  legitimate dumps (default 24)
//   --seeds  dumps per fault magnitude, seeds 7, 8, ... (default 1); a check catches a magnitude
//            when it fails on every one ("3/5": on 3 of 5)
//   --only   run only the fault classes whose description contains TEXT (e.g. "truncated")
//   --keep   keep every faulty dump as DIR/fault-<class>-<magnitude>-<seed>.h5, to check or
//            profile one again by hand
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "certify/commands/check.h"
#include "certify/io/dump_reader.h"
#include "fixtures/generator.h"
#include "tools/bench/bench_common.h"

namespace {

using namespace ncert;

struct Options {
  Index n = 16480;
  int legit = 24;
  int seeds = 1;
  int threads = 0;
  std::string dir = "bench-power";
  std::string only;   ///< a fault class's description must contain it ("": every class)
  bool keep = false;  ///< keep every faulty dump as DIR/fault-<class>-<magnitude>.h5
};

/// What `check` said of one dump: the failing check kinds (projection checks only), the failing
/// signature test's evidence, and the seconds it took.
struct Outcome {
  std::set<std::string> failing;
  std::optional<certify::SignatureEvidence> signature;  ///< where signature FAILs
  double seconds = 0;
};

Outcome check_outcome(const std::string& path) {
  certify::CheckCommandOptions co;
  co.dump = path;
  const double t0 = bench::now_seconds();
  auto r = certify::run_check(co);
  Outcome out;
  out.seconds = bench::now_seconds() - t0;
  if (!r.ok()) {
    out.failing.insert("error: " + r.status().to_string());
    return out;
  }
  for (const certify::CheckResult& c : r->checks) {
    if (!c.failed()) continue;
    out.failing.insert(std::string(check_kind_name(c.kind)));
    if (const auto* e = std::get_if<certify::SignatureEvidence>(&c.evidence)) out.signature = *e;
  }
  return out;
}

struct Sweep {
  std::string fault;
  std::string unit;
  std::vector<double> magnitudes;  ///< from the smallest to the largest fault
  std::function<void(fixtures::ProjectionSpec&, double)> plant;
  DType output = DType::kF32;
  std::string k_walk;  ///< the walk the dump declares ("": none; the engine sums split:8:fma)
  /// Whether a failing signature test names the planted fault's location (column `located`);
  /// empty: not scored.
  std::function<bool(const certify::SignatureEvidence&)> located;
  /// What the dumps of the class hold beside the fault, the legitimate twin's too (a bias, an
  /// affine segment); empty: fixtures::production_in_proj as it is.
  std::function<void(fixtures::ProjectionSpec&)> shape;
};

/// The location fixtures::ProjectionSpec's faults are planted at, as signature names it.
bool names_group_scale(const certify::SignatureEvidence& e) {
  return !e.fit && !e.zero_point && !e.strongest.empty() && e.strongest.front().col == 0 &&
         e.strongest.front().k_begin == 0 && e.strongest.front().k_end == 64;
}
bool names_row(const certify::SignatureEvidence& e) {
  return e.fit && e.fit->kind == certify::FitKind::kRow && e.fit->row == fixtures::kFaultRow;
}
/// engine_x_group_scale_error: kFaultRow's second activation group (k 128-255 in groups of 128).
bool names_row_group(const certify::SignatureEvidence& e) {
  return e.fit && e.fit->kind == certify::FitKind::kRow && e.fit->row == fixtures::kFaultRow && e.fit->group == 1 &&
         !e.fit->offset;
}
bool names_two_rows(const certify::SignatureEvidence& e) {
  // engine_faulty_rows = 2: kFaultRow, and kFaultRowStride after it with twice its error.
  return e.fit && e.fit->kind == certify::FitKind::kRows && e.fit->rows.size() == 2 &&
         e.fit->rows[0].row == fixtures::kFaultRow + fixtures::kFaultRowStride &&
         e.fit->rows[1].row == fixtures::kFaultRow;
}
/// engine_wrong_values = 3: each at its row and column, in any order.
bool names_three_values(const certify::SignatureEvidence& e) {
  if (!e.fit || e.fit->kind != certify::FitKind::kElements || e.fit->rows.size() != 3) return false;
  std::set<std::pair<Index, Index>> named, planted;
  for (const certify::FittedRow& w : e.fit->rows) named.emplace(w.row, w.col);
  for (Index i = 0; i < 3; ++i) {
    planted.emplace((fixtures::kFaultRow + i * fixtures::kFaultRowStride) % 32,
                    fixtures::kFaultColumn + i * fixtures::kWrongValueColumnStride);
  }
  return named == planted;
}
bool names_column_offset(const certify::SignatureEvidence& e) {
  return e.fit && e.fit->kind == certify::FitKind::kColumnOffset && e.fit->col == fixtures::kFaultColumn;
}
bool names_group_offset(const certify::SignatureEvidence& e) {
  return e.fit && e.fit->kind == certify::FitKind::kGroupOffset && e.fit->col == 0 && e.fit->group == 0;
}

std::string write(const Options& o, const fixtures::ProjectionSpec& p, const std::string& name) {
  fixtures::DumpSpec d;
  d.projections.push_back(p);
  std::string path = o.dir + "/" + name + ".h5";
  const Status s = fixtures::write_dump(path, d, {}, true);
  if (!s.ok()) {
    std::fprintf(stderr, "bench_power: %s: %s\n", path.c_str(), s.to_string().c_str());
    std::exit(4);
  }
  return path;
}

/// |scale| of the faulted AF4 group (row 0, group 0 of the first segment) over the rms of the
/// segment's scales: the fault moves the weights by e times this group's share, so a group whose
/// scale is a tenth of the others' needs a ten times larger e to move the outputs as far.
double faulted_scale_share(const certify::DumpReader& reader) {
  Result<std::vector<std::uint16_t>> s = reader.read_u16("/projections/in_proj/weight/s0_af4/scales");
  if (!s.ok() || s->empty()) {
    std::fprintf(stderr, "bench_power: no AF4 scales\n");
    std::exit(4);
  }
  const auto value = [](std::uint16_t b) { return static_cast<double>(std::bit_cast<float>(std::uint32_t{b} << 16)); };
  double sum = 0;
  for (std::uint16_t b : *s) sum += value(b) * value(b);
  return std::abs(value(s->front())) / std::sqrt(sum / static_cast<double>(s->size()));
}

/// What bench_power reads back from a dump it wrote.
struct StoredDump {
  std::vector<std::uint8_t> outputs;  ///< y_unpacked's bytes (copied: the file is rewritten next)
  double share = 0;                   ///< faulted_scale_share, where asked for
};

/// Opens the dump once for its outputs and, for the group-scale sweeps, the faulted group's share.
StoredDump read_back(const std::string& path, bool share) {
  auto reader = certify::DumpReader::open(path);
  Result<certify::Bytes> b =
      reader.ok() ? reader->read_bytes("/projections/in_proj/y_unpacked") : Result<certify::Bytes>(reader.status());
  if (!b.ok()) {
    std::fprintf(stderr, "bench_power: %s: %s\n", path.c_str(), b.status().to_string().c_str());
    std::exit(4);
  }
  return {{b->begin(), b->end()}, share ? faulted_scale_share(*reader) : 0.0};
}

/// How many values of `element_bytes` each differ between two stored outputs.
long long changed_values(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b,
                         std::size_t element_bytes) {
  long long n = 0;
  for (std::size_t i = 0; i + element_bytes <= std::min(a.size(), b.size()); i += element_bytes) {
    n += std::equal(a.begin() + static_cast<std::ptrdiff_t>(i),
                    a.begin() + static_cast<std::ptrdiff_t>(i + element_bytes),
                    b.begin() + static_cast<std::ptrdiff_t>(i))
             ? 0
             : 1;
  }
  return n;
}

/// The fault classes, each at a sweep of magnitudes from the smallest to the largest.
std::vector<Sweep> fault_sweeps() {
  const auto scale = [](fixtures::ProjectionSpec& p, double e) { p.engine_group_scale_error = static_cast<float>(e); };
  const std::vector<double> bf16_scale = {0.002, 0.005, 0.01, 0.02, 0.05, 0.1};
  const std::vector<double> relative = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05};
  return {
      {"one AF4 group's scale x (1 + e), f32 outputs", "e", relative, scale, DType::kF32, "", names_group_scale, {}},
      {"one AF4 group's scale x (1 + e), bf16 outputs",
       "e",
       bf16_scale,
       scale,
       DType::kBf16,
       "",
       names_group_scale,
       {}},
      {"one AF4 group's scale x (1 + e), bf16 outputs, the engine's walk declared (k_walk split:8:fma)",
       "e",
       bf16_scale,
       scale,
       DType::kBf16,
       "split:8:fma",
       names_group_scale,
       {}},
      {"one row's activations x (1 + e) (a wrong activation scale), f32 outputs",
       "e",
       relative,
       [](fixtures::ProjectionSpec& p, double e) { p.engine_row_scale_error = static_cast<float>(e); },
       DType::kF32,
       "",
       names_row,
       {}},
      {"two rows' activations x (1 + e) and x (1 + 2e), f32 outputs",
       "e",
       relative,
       [](fixtures::ProjectionSpec& p, double e) {
         p.engine_row_scale_error = static_cast<float>(e);
         p.engine_faulty_rows = 2;
       },
       DType::kF32,
       "",
       names_two_rows,
       {}},
      {"one row's activation group x (1 + e) (int8 activations in groups of 128), bf16 outputs",
       "e",
       {0.001, 0.002, 0.005, 0.01, 0.02, 0.05},
       [](fixtures::ProjectionSpec& p, double e) { p.engine_x_group_scale_error = static_cast<float>(e); },
       DType::kBf16,
       "",
       names_row_group,
       [](fixtures::ProjectionSpec& p) {
         p.x = DType::kF32;
         p.x_quant = "int8";
         p.x_quant_group = 128;
       }},
      {"one column's bias + d, f32 outputs",
       "d",
       {0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01},
       [](fixtures::ProjectionSpec& p, double d) { p.engine_bias_offset = static_cast<float>(d); },
       DType::kF32,
       "",
       names_column_offset,
       [](fixtures::ProjectionSpec& p) { p.epilogue = reference::Epilogue::kBias; }},
      {"three wrong values + d, + 2d and + 3d (in three rows and columns), f32 outputs",
       "d",
       {0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01},
       [](fixtures::ProjectionSpec& p, double d) {
         p.engine_value_offset = static_cast<float>(d);
         p.engine_wrong_values = 3;
       },
       DType::kF32,
       "",
       names_three_values,
       {}},
      {"one AF4 affine group's bias + d, f32 outputs",
       "d",
       {0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002},
       [](fixtures::ProjectionSpec& p, double d) { p.engine_group_bias_error = static_cast<float>(d); },
       DType::kF32,
       "",
       names_group_offset,
       [](fixtures::ProjectionSpec& p) { p.segments[0].af4.variant = reference::Af4Variant::kAffine; }},
      {"an accumulator keeping p of f32's 24 bits (rounding to nearest), f32 outputs",
       "24 - p",
       {2, 4, 5, 6, 7, 8, 10},
       [](fixtures::ProjectionSpec& p, double lost) {
         p.engine_order = "promote:5120:" + std::to_string(24 - static_cast<int>(lost)) + ":rne";
       },
       DType::kF32,
       "",
       {},
       {}},
      {"a fraction of bf16 outputs truncated instead of rounded",
       "fraction",
       {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1},
       [](fixtures::ProjectionSpec& p, double f) {
         p.engine_truncate_every = static_cast<Index>(std::lround(1.0 / f));
       },
       DType::kBf16,
       "",
       {},
       {}},
  };
}

/// Check seconds and checks run, for the mean time per check.
struct CheckTime {
  double seconds = 0;
  int checks = 0;
};

/// One fault class: each magnitude on every seed, the checks that fail it, and per seed the
/// outputs the fault changed against the legitimate twin.
void run_sweep(const Options& o, const Sweep& s, int number, const std::vector<std::string>& kinds, CheckTime& time) {
  std::printf("\n%s\n  %-10s", s.fault.c_str(), s.unit.c_str());
  for (const std::string& k : kinds) std::printf(" %-10s", k.c_str());
  std::printf(" located    changed (of %lld stored outputs; min-max over seeds)\n", 32LL * static_cast<long long>(o.n));
  const auto dump_spec = [&](int seed) {
    fixtures::ProjectionSpec p = fixtures::production_in_proj(o.n, s.output, 7 + static_cast<std::uint64_t>(seed));
    p.k_walk = s.k_walk;
    if (s.shape) s.shape(p);
    return p;
  };
  const bool group_fault = s.fault.find("group's scale") != std::string::npos;
  // The legitimate twin of each seed: the same dump without the fault.
  std::vector<StoredDump> twins;
  twins.reserve(static_cast<std::size_t>(o.seeds));
  for (int seed = 0; seed < o.seeds; ++seed) twins.push_back(read_back(write(o, dump_spec(seed), "twin"), group_fault));
  // Per seed and magnitude (largest first): the outputs the fault changed, "*" when check fails.
  std::vector<std::string> per_seed(static_cast<std::size_t>(o.seeds));
  const std::size_t element_bytes = s.output == DType::kF32 ? 4 : 2;
  std::map<std::string, double> smallest;
  // Largest first: the smallest magnitude caught is the last one of an unbroken run of FAILs.
  std::map<std::string, bool> broken;
  CheckTime class_time;
  for (auto it = s.magnitudes.rbegin(); it != s.magnitudes.rend(); ++it) {
    std::map<std::string, int> fails;
    long long fewest = -1, most = 0;
    int located = 0;
    for (int seed = 0; seed < o.seeds; ++seed) {
      fixtures::ProjectionSpec p = dump_spec(seed);
      s.plant(p, *it);
      const std::string path = write(o, p, "fault");
      const Outcome outcome = check_outcome(path);
      const std::set<std::string>& f = outcome.failing;
      time.seconds += outcome.seconds;
      ++time.checks;
      class_time.seconds += outcome.seconds;
      ++class_time.checks;
      if (o.keep) {
        char name[64];
        std::snprintf(name, sizeof name, "/fault-%d-%g-%d.h5", number, *it, 7 + seed);
        std::filesystem::copy_file(path, o.dir + name, std::filesystem::copy_options::overwrite_existing);
      }
      if (s.located && outcome.signature && s.located(*outcome.signature)) ++located;
      const long long changed =
          changed_values(read_back(path, false).outputs, twins[static_cast<std::size_t>(seed)].outputs, element_bytes);
      fewest = fewest < 0 ? changed : std::min(fewest, changed);
      most = std::max(most, changed);
      // "check": the whole check's verdict, whichever of its checks fails.
      for (const std::string& k : kinds) fails[k] += (k == "check" ? !f.empty() : f.count(k) > 0) ? 1 : 0;
      const auto si = static_cast<std::size_t>(seed);
      char cell[32];
      std::snprintf(cell, sizeof cell, " %7lld%s", changed, f.empty() ? " " : "*");
      per_seed[si] += cell;
      for (const std::string& x : f) {
        if (x.rfind("error", 0) == 0) std::printf("  seed %d: %s\n", 7 + seed, x.c_str());
      }
    }
    std::printf("  %-10g", *it);
    for (const std::string& k : kinds) {
      const int n = fails[k];
      const std::string cell = n == o.seeds ? "FAIL" : n == 0 ? "-" : std::to_string(n) + "/" + std::to_string(o.seeds);
      std::printf(" %-10s", cell.c_str());
      if (n == o.seeds && !broken[k]) smallest[k] = *it;
      if (n < o.seeds) broken[k] = true;
    }
    // "located": signature FAILs and names the planted fault's place (its row, column, group).
    const std::string where = !s.located           ? "n/a"
                              : located == o.seeds ? "yes"
                              : located == 0       ? "-"
                                                   : std::to_string(located) + "/" + std::to_string(o.seeds);
    std::printf(" %-10s", where.c_str());
    if (s.located && located == o.seeds && !broken["located"]) smallest["located"] = *it;
    if (located < o.seeds) broken["located"] = true;
    std::printf(" %lld-%lld\n", fewest, most);
  }
  std::printf("  smallest caught:");
  for (const std::string& k : kinds) {
    if (smallest.count(k)) std::printf(" %s %g;", k.c_str(), smallest[k]);
  }
  if (smallest.count("located")) std::printf(" located from %g;", smallest["located"]);
  std::printf("\n  mean check time of these faulty dumps %.2f s\n", class_time.seconds / class_time.checks);
  if (group_fault) {
    // The fault moves the weights by e |s|: a group whose scale is a tenth of the others' needs
    // a ten times larger e to move the outputs as far.
    std::printf(
        "  per seed: the faulted group's |scale| / rms of the segment's scales; per e, the outputs the "
        "fault changed, * where check FAILs\n  seed  |s|/rms ");
    for (auto it = s.magnitudes.rbegin(); it != s.magnitudes.rend(); ++it) std::printf(" %8g", *it);
    std::printf("\n");
    for (int seed = 0; seed < o.seeds; ++seed) {
      const auto si = static_cast<std::size_t>(seed);
      std::printf("  %-5d %6.3f  %s\n", 7 + seed, twins[si].share, per_seed[si].c_str());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Detection power of the default `check`: the smallest magnitude of each planted fault class each check "
      "catches, then every check's false alarms over legitimate dumps"};
  Options o;
  app.add_option("--n", o.n, "Output columns (16480: the production in_proj; 4096 runs 4x faster)")
      ->check(bench::at_least(1));
  app.add_option("--legit", o.legit, "Legitimate dumps checked for false alarms")->check(bench::at_least(0));
  app.add_option("--seeds", o.seeds,
                 "Dumps per fault magnitude (seeds 7, 8, ...); a check catches a magnitude when it fails on every one")
      ->check(bench::at_least(1));
  app.add_option("--only", o.only,
                 "Run only the fault classes whose description contains TEXT (e.g. \"truncated\"; default: every "
                 "class)");
  app.add_option("--dir", o.dir, "Where the generated dumps are written");
  app.add_flag("--keep", o.keep,
               "Keep every faulty dump, as DIR/fault-<class>-<magnitude>-<seed>.h5 (classes numbered from 1 in the "
               "order printed)");
  app.add_option("--threads", o.threads, "Threads of the check (0: OpenMP's default)")->check(bench::at_least(0));
  if (const std::optional<int> rc = bench::parse_command_line(app, argc, argv)) return *rc;
  if (o.threads > 0) omp_set_num_threads(o.threads);
  std::filesystem::create_directories(o.dir);
  const std::vector<std::string> kinds = {"identity", "bound", "walk", "signature", "variance", "bias", "check"};
  std::printf("bench_power: K 5120 x N %lld, 32 rows in 32 slots, %d threads, %d seed(s) per magnitude\n",
              static_cast<long long>(o.n), omp_get_max_threads(), o.seeds);
  CheckTime time;
  int number = 0;
  for (const Sweep& s : fault_sweeps()) {
    ++number;
    if (s.fault.find(o.only) != std::string::npos) run_sweep(o, s, number, kinds, time);
  }
  // Legitimate dumps: seeds x output types x the engine's summation order.
  const std::vector<std::string> orders = {"split:8:fma", "pairwise", "lanes:16:halving:fma", "seq"};
  std::map<std::string, int> alarms;
  for (int i = 0; i < o.legit; ++i) {
    const DType out = i % 2 ? DType::kBf16 : DType::kF32;
    fixtures::ProjectionSpec p = fixtures::production_in_proj(o.n, out, 100 + static_cast<std::uint64_t>(i));
    p.engine_order = orders[static_cast<std::size_t>(i / 2) % orders.size()];
    const Outcome outcome = check_outcome(write(o, p, "legit"));
    time.seconds += outcome.seconds;
    ++time.checks;
    for (const std::string& k : outcome.failing) ++alarms[k];
  }
  std::printf(
      "\nfalse alarms over %d legitimate dumps (f32 and bf16 outputs; orders split:8:fma, pairwise, "
      "lanes:16:halving:fma, seq):",
      o.legit);
  if (alarms.empty()) std::printf(" none");
  for (const auto& [k, n] : alarms) std::printf(" %s %d;", k.c_str(), n);
  std::printf("\n");
  if (time.checks > 0) std::printf("mean check time %.2f s per dump\n", time.seconds / time.checks);
  std::filesystem::remove(o.dir + "/fault.h5");
  std::filesystem::remove(o.dir + "/legit.h5");
  std::filesystem::remove(o.dir + "/twin.h5");
  return alarms.empty() ? 0 : 1;
}
