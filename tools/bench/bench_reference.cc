// Benchmark of the exact reference (issue 3): M = 128, K = 5120, N = 16480 with (a) BF16 and
// (b) AF4 affine (group 64) weights. In the same process and on the same threads it times one
// Eigen f64 GEMM of the same shape (the baseline) and reports reference / GEMM. The reference
// runs first, so the peak RSS it reports is the reference's own (the f64 baseline alone needs
// 675 MB for W). Usage: bench_reference [--reps N] [--threads T]
#include <omp.h>

#include <Eigen/Core>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "reference/float_bits.h"
#include "reference/linear.h"
#include "tools/bench/bench_common.h"

namespace {

using namespace ncert;
using namespace ncert::reference;

constexpr Index kM = 128, kK = 5120, kN = 16480;

// Consumes blocks cheaply but observably, so nothing is optimized away.
class ChecksumSink final : public ReferenceSink {
 public:
  void consume(const ReferenceBlock& b) override {
    double s = 0;
    for (Index i = 0; i < b.rows * b.width(); ++i) s += b.accept[i].hi - b.accept[i].lo;
#pragma omp atomic
    sum_ += s;
  }
  double sum_ = 0;
};

struct Data {
  std::vector<std::uint16_t> x;
  std::vector<std::uint16_t> w_bf16;
  std::vector<std::uint8_t> codes, scales, biases;
  Weights weights;
  LinearProblem problem;
};

void fill(Data& d, bool af4) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> n(0.0f, 1.0f);
  d.x.resize(kM * kK);
  for (auto& v : d.x) v = f32_to_bf16(n(rng));
  WeightSegment seg;
  seg.row_begin = 0;
  seg.row_end = kN;
  if (!af4) {
    d.w_bf16.resize(static_cast<std::size_t>(kN * kK));
    for (auto& v : d.w_bf16) v = f32_to_bf16(0.02f * n(rng));
    seg.format = WeightFormat::kBf16;
    seg.values = d.w_bf16.data();
  } else {
    d.codes.resize(static_cast<std::size_t>(kN * kK / 2));
    for (auto& c : d.codes) c = static_cast<std::uint8_t>(rng());
    const Index groups = kN * (kK / 64);
    d.scales.resize(static_cast<std::size_t>(groups * 2));
    d.biases.resize(static_cast<std::size_t>(groups * 2));
    for (Index g = 0; g < groups; ++g) {
      const std::uint16_t s = f32_to_bf16(0.002f * n(rng)), b = f32_to_bf16(0.02f * n(rng));
      std::memcpy(&d.scales[g * 2], &s, 2);
      std::memcpy(&d.biases[g * 2], &b, 2);
    }
    seg.format = WeightFormat::kAf4;
    seg.af4.layout.variant = Af4Variant::kAffine;
    seg.af4.layout.packing = Af4Packing::kU32Lsb;
    seg.af4.layout.group_size = 64;
    seg.af4.layout.scale_dtype = DType::kBf16;
    seg.af4.rows = kN;
    seg.af4.k = kK;
    seg.af4.codes = d.codes.data();
    seg.af4.scales = d.scales.data();
    seg.af4.biases = d.biases.data();
  }
  d.weights.n = kN;
  d.weights.k = kK;
  d.weights.segments = {seg};
  d.problem.x = {DType::kBf16, d.x.data(), kM, kK, kK};
  d.problem.weights = &d.weights;
  d.problem.output = DType::kBf16;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 3, threads = omp_get_max_threads();
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
  }
  omp_set_dynamic(0);
  omp_set_num_threads(threads);
  Eigen::setNbThreads(threads);
  std::printf("bench_reference: M=%ld K=%ld N=%ld threads=%d reps=%d\n", (long)kM, (long)kK,
              (long)kN, threads, reps);

  double ref_time[2] = {0, 0};
  double rss_after_ref = 0;
  for (int variant = 0; variant < 2; ++variant) {
    Data d;
    fill(d, variant == 1);
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      ChecksumSink sink;
      const double t0 = bench::now_seconds();
      auto s = evaluate_reference(d.problem, sink);
      t.push_back(bench::now_seconds() - t0);
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.status().to_string().c_str());
        return 1;
      }
    }
    ref_time[variant] = bench::median(t);
  }
  rss_after_ref = bench::peak_rss_mib();

  // Baseline: one Eigen f64 GEMM of the same shape, on the same threads (Eigen's own OpenMP).
  Eigen::MatrixXd a = Eigen::MatrixXd::Random(kM, kK);
  Eigen::MatrixXd b = Eigen::MatrixXd::Random(kK, kN);
  Eigen::MatrixXd c(kM, kN);
  std::vector<double> g;
  for (int r = 0; r < reps; ++r) {
    const double t0 = bench::now_seconds();
    c.noalias() = a * b;
    g.push_back(bench::now_seconds() - t0);
  }
  const double gemm = bench::median(g);
  const double gflops = 2.0 * kM * kK * kN / gemm * 1e-9;
  std::printf("eigen f64 gemm       %8.3f s  (%.1f GFLOP/s)\n", gemm, gflops);
  std::printf("reference bf16       %8.3f s  ratio %.2f x gemm\n", ref_time[0], ref_time[0] / gemm);
  std::printf("reference af4 (g64)  %8.3f s  ratio %.2f x gemm\n", ref_time[1], ref_time[1] / gemm);
  std::printf("peak RSS (reference runs only) %.0f MiB\n", rss_after_ref);
  std::printf("checksum %g\n", c(0, 0));
  return 0;
}
