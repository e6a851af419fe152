// Benchmark of the exact reference: M = 128, K = 5120, N = 16480 with (a) BF16 and (b) AF4
// affine (group 64) weights. In the same process and on the same threads it times one f64 GEMM
// of the same shape through Eigen and, when built with it, through OpenBLAS (cblas_dgemm of the
// pthread build, the fastest f64 GEMM Debian ships: the floor the reference is held to), and
// reports reference / GEMM against each. Repetitions are interleaved (GEMMs, bf16 reference,
// AF4 reference, then again), and the ratio reported is the
// median of the per-repetition ratios: this machine is shared, and a load change between two
// separate medians would move their quotient. The references run first, so the peak RSS reported
// is the reference's own (the f64 baseline alone needs 675 MB for W).
//
// --bounds DUMP.h5...: for every projection of the given dumps, the size of B with S from the
// f32 GEMM (as the reference computes it) against B with S from an f64 GEMM inflated by its own
// error (as it was computed before): max and mean of B_new / B_old (docs/error-bounds.md §1).
//
// --s-block: S of one reference block (128 x 5,120 x 128 magnitudes) on one thread, interleaved:
// from bf16 magnitudes through the AVX512-BF16 instruction (where the build has it) and through
// the portable path, and by the f32 GEMM; with the same bits from both bf16 paths, and which
// one the reference takes on this CPU. Build with -DNCERT_MARCH=<cpu> to see what a build for a
// CPU without the instruction pays.
//
// Usage: bench_reference [--reps N] [--threads T]
//        bench_reference --s-block [--reps N]
//        bench_reference --bounds DUMP.h5... [--threads T]
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "certify/io/dump_reader.h"
#include "certify/projection/projection_data.h"
#include "reference/detail/gemm.h"
#include "reference/detail/s_bf16.h"
#include "reference/float_bits.h"
#include "reference/large_block.h"
#include "reference/linear.h"
#include "tools/bench/bench_common.h"

#if NCERT_BENCH_OPENBLAS
#include <cblas.h>
#endif

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

/// How the reference computes S: from bf16 magnitudes by the kernel it picks for this CPU (the
/// default), by the instruction, portably, or by the f32 GEMM.
enum class SPath { kBf16, kBf16Instruction, kBf16Portable, kF32Gemm };

double time_reference(const Data& d, SPath s_path = SPath::kBf16) {
  ChecksumSink sink;
  ReferenceOptions options;
  options.bf16_s = s_path != SPath::kF32Gemm;
  if (s_path == SPath::kBf16Instruction) options.bf16_s_kernel = Bf16SKernel::kInstruction;
  if (s_path == SPath::kBf16Portable) options.bf16_s_kernel = Bf16SKernel::kPortable;
  const double t0 = bench::now_seconds();
  auto s = evaluate_reference(d.problem, sink, options);
  const double t = bench::now_seconds() - t0;
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.status().to_string().c_str());
    std::exit(1);
  }
  return t;
}

int run_speed(int reps) {
  Data bf16, af4;
  fill(bf16, false);
  fill(af4, true);
  // Warm-up: first-touch page faults of the per-thread scratch, Eigen's blocking set-up.
  time_reference(bf16);
  time_reference(af4);
  const double rss_after_ref = bench::peak_rss_mib();

  // Baselines: one f64 GEMM of the same shape on the same threads, Eigen's (its own OpenMP)
  // and OpenBLAS's (its own pthreads, told the same count).
  Eigen::MatrixXd a = Eigen::MatrixXd::Random(kM, kK);
  Eigen::MatrixXd b = Eigen::MatrixXd::Random(kK, kN);
  Eigen::MatrixXd c(kM, kN);
  c.noalias() = a * b;  // warm-up
#if NCERT_BENCH_OPENBLAS
  Eigen::MatrixXd c_blas(kM, kN);
  // OpenBLAS's threads spin for 2^28 cycles after a call before they sleep (its default
  // OPENBLAS_THREAD_TIMEOUT, 28: 0.08-0.13 s at 2-3.5 GHz), and whatever runs next shares the
  // cores with them: the reference timed right after this GEMM ran ~10 % slower on 2 cores
  // (0.341-0.359 s against 0.309-0.316 s), which every ratio printed before 2026-12-04 carried.
  // So the GEMM is followed by a pause longer than the spin, outside the timings.
  auto blas_gemm = [&] {
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(kM), static_cast<int>(kN),
                static_cast<int>(kK), 1.0, a.data(), static_cast<int>(kM), b.data(), static_cast<int>(kK), 0.0,
                c_blas.data(), static_cast<int>(kM));
  };
  auto after_blas = [] { std::this_thread::sleep_for(std::chrono::milliseconds(400)); };
  blas_gemm();  // warm-up
  after_blas();
#endif
  // The bf16 reference runs a second time with S from the f32 GEMM (ReferenceOptions::bf16_s
  // off), side by side: what S from bf16 magnitudes saves (or, without the instruction, costs).
  // With the AVX512-BF16 instruction built, a third time with the kernel the default did not
  // pick for this CPU (ReferenceOptions::bf16_s_kernel): what the other one would cost here,
  // the same bits either way.
  const bool instruction = reference::detail::kSBf16Instruction;
  const bool picked_instruction = reference::detail::instruction_is_faster();
  const SPath other = picked_instruction ? SPath::kBf16Portable : SPath::kBf16Instruction;
  time_reference(bf16, SPath::kF32Gemm);
  if (instruction) time_reference(bf16, other);
  std::vector<double> g, o, rb, ra, rf, rk, ratio_b, ratio_a, ratio_bo, ratio_ao, ratio_f, ratio_k;
  for (int r = 0; r < reps; ++r) {
    double t0 = bench::now_seconds();
    c.noalias() = a * b;
    g.push_back(bench::now_seconds() - t0);
#if NCERT_BENCH_OPENBLAS
    t0 = bench::now_seconds();
    blas_gemm();
    o.push_back(bench::now_seconds() - t0);
    after_blas();
#endif
    rb.push_back(time_reference(bf16));
    ra.push_back(time_reference(af4));
    rf.push_back(time_reference(bf16, SPath::kF32Gemm));
    ratio_f.push_back(rf.back() / rb.back());
    if (instruction) {
      rk.push_back(time_reference(bf16, other));
      ratio_k.push_back(rk.back() / rb.back());
    }
    ratio_b.push_back(rb.back() / g.back());
    ratio_a.push_back(ra.back() / g.back());
    if (!o.empty()) {
      ratio_bo.push_back(rb.back() / o.back());
      ratio_ao.push_back(ra.back() / o.back());
    }
  }
  auto gemm_line = [](const char* name, const std::vector<double>& t) {
    const double s = bench::median(t);
    std::printf("%-20s %8.3f s  (%.1f GFLOP/s)\n", name, s, 2.0 * kM * kK * kN / s * 1e-9);
  };
  auto ratio_line = [](const char* name, const std::vector<double>& t, const std::vector<double>& ratio,
                       const char* base) {
    std::printf("%-20s %8.3f s  ratio %.2f x %s (per-rep ratios %.2f..%.2f)\n", name, bench::median(t),
                bench::median(ratio), base, *std::min_element(ratio.begin(), ratio.end()),
                *std::max_element(ratio.begin(), ratio.end()));
  };
  gemm_line("eigen f64 gemm", g);
  if (!o.empty()) {
#if NCERT_BENCH_OPENBLAS
    // OpenBLAS picks its kernels by CPU at load time (0.3.21 runs Haswell's AVX2 kernels on
    // AMD Zen 4; OPENBLAS_CORETYPE=SkylakeX selects its AVX-512 ones): the name says which ran.
    std::printf("openblas core         %s\n", openblas_get_corename());
#endif
    gemm_line("openblas f64 gemm", o);
    std::vector<double> eo(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) eo[i] = g[i] / o[i];
    std::printf("eigen / openblas     %8.2f x\n", bench::median(eo));
  } else {
    std::printf("openblas f64 gemm    not built (libopenblas-pthread-dev missing): Eigen is the only baseline\n");
  }
  ratio_line("reference bf16", rb, ratio_b, "eigen");
  ratio_line("reference af4 (g64)", ra, ratio_a, "eigen");
  if (instruction) {
    std::printf("bf16 S kernel        the %s one (this CPU's pick)\n", picked_instruction ? "instruction" : "portable");
    ratio_line("bf16, S by f32 GEMM", rf, ratio_f, "the pick's");
    ratio_line(picked_instruction ? "bf16, S portable" : "bf16, S instruction", rk, ratio_k, "the pick's");
  } else {
    // No AVX512-BF16 on the build's target: the reference's bf16 S is the portable path.
    ratio_line("bf16, S by f32 GEMM", rf, ratio_f, "the portable bf16 S's");
  }
  if (!o.empty()) {
    ratio_line("reference bf16", rb, ratio_bo, "openblas");
    ratio_line("reference af4 (g64)", ra, ratio_ao, "openblas");
  }
  std::printf("peak RSS (reference runs only) %.0f MiB\n", rss_after_ref);
  std::printf("checksum %g\n", c(0, 0));
#if NCERT_BENCH_OPENBLAS
  // Both baselines computed the same product: a wrong leading dimension or transpose would
  // time a different problem.
  std::printf("openblas - eigen: max |diff| %.3g (of values up to %.3g)\n", (c - c_blas).cwiseAbs().maxCoeff(),
              c.cwiseAbs().maxCoeff());
#endif
  return 0;
}

// ---- --s-block ---------------------------------------------------------------------------------

int run_s_block(int reps) {
  constexpr Index kBlock = 128, kp = reference::detail::bf16_padded(kK);
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> magnitude(0.01f, 2.0f);
  std::vector<float> xm(static_cast<std::size_t>(kM * kK)), wm(static_cast<std::size_t>(kBlock * kK));
  for (float& v : xm) v = magnitude(rng);
  // Weight magnitudes that are bf16 numbers, as the reference requires of a block it sums so.
  for (float& v : wm) v = bf16_to_f32(f32_to_bf16(magnitude(rng)));
  LargeVector<std::uint16_t> xb(static_cast<std::size_t>(kM * kp)), wb(static_cast<std::size_t>(kBlock * kp));
  if (!reference::detail::to_bf16_magnitudes(xm.data(), kM, kK, true, xb.data()) ||
      !reference::detail::to_bf16_magnitudes(wm.data(), kBlock, kK, false, wb.data())) {
    std::fprintf(stderr, "bench_reference: magnitudes out of the bf16 path's range\n");
    return 1;
  }
  std::vector<float> c_instruction(static_cast<std::size_t>(kM * kBlock)), c_portable(c_instruction.size()),
      c_gemm(c_instruction.size());
  const bool instruction = reference::detail::kSBf16Instruction;
  constexpr int kInner = 20;  // blocks per timing (one takes ~1-3 ms)
  auto time_it = [&](auto&& f) {
    const double t0 = bench::now_seconds();
    for (int i = 0; i < kInner; ++i) f();
    return (bench::now_seconds() - t0) / kInner;
  };
  std::vector<double> ti, tp, tg;
  for (int r = 0; r < reps; ++r) {
    if (instruction) {
      ti.push_back(time_it(
          [&] { reference::detail::s_gemm_bf16(xb.data(), kM, wb.data(), kBlock, kp, c_instruction.data(), true); }));
    }
    tp.push_back(time_it(
        [&] { reference::detail::s_gemm_bf16(xb.data(), kM, wb.data(), kBlock, kp, c_portable.data(), false); }));
    tg.push_back(time_it([&] { reference::detail::gemm_abt(xm.data(), kM, kK, wm.data(), kBlock, c_gemm.data()); }));
  }
  const double flops = 2.0 * kM * kK * kBlock;
  auto line = [&](const char* name, const std::vector<double>& t) {
    const double s = bench::median(t);
    std::printf("%-28s %7.3f ms  %6.1f GFLOP/s  %5.2f x the f32 GEMM's speed\n", name, s * 1e3, flops / s * 1e-9,
                bench::median(tg) / s);
  };
  std::printf("bench_reference --s-block: S of %ld x %ld x %ld on one thread, reps=%d (x %d blocks, interleaved)\n",
              (long)kM, (long)kK, (long)kBlock, reps, kInner);
  if (instruction) line("bf16 S, the instruction", ti);
  line("bf16 S, portable", tp);
  line("f32 GEMM (Eigen)", tg);
  if (instruction) {
    const bool same = std::memcmp(c_instruction.data(), c_portable.data(), c_portable.size() * sizeof(float)) == 0;
    std::printf("instruction and portable: %s\n", same ? "the same bits" : "DIFFERENT BITS");
    std::printf("the reference takes the %s one on this CPU\n",
                reference::detail::instruction_is_faster() ? "instruction's" : "portable");
    if (!same) return 1;
  } else {
    std::printf("no AVX512-BF16 on the build's target: the reference's bf16 S is the portable path\n");
  }
  return 0;
}

// ---- --bounds ----------------------------------------------------------------------------------

/// Per block: B_new / B_old statistics, merged in block order afterwards.
struct RatioStats {
  double max = 0, min = 1e300, sum = 0;
  Index n = 0;
  void add(double r) {
    max = std::max(max, r);
    min = std::min(min, r);
    sum += r;
    ++n;
  }
  void merge(const RatioStats& o) {
    max = std::max(max, o.max);
    min = std::min(min, o.min);
    sum += o.sum;
    n += o.n;
  }
};

/// Recomputes each block's S as an f64 GEMM over the unrounded magnitudes (the previous
/// reference) and compares the two B: B_old = B_new - (gamma_acc + eps_coef)(S_new - S_old)
/// (1 + 2^-50), where S_old = inflate_s(f64 S). Only S differs between the two (the 1-norms of
/// eta change by ~1e-12 of a term of 2^-126 scale, which this ignores).
class BoundRatioSink final : public ReferenceSink {
 public:
  BoundRatioSink(const LinearProblem& p, Index blocks) : p_(p), stats_(static_cast<std::size_t>(blocks)) {
    const Index M = p.x.rows, K = p.weights->k;
    x_abs_.resize(static_cast<std::size_t>(M * K));
    for (Index i = 0; i < M; ++i) {
      for (Index c = 0; c < K; ++c) x_abs_[i * K + c] = std::fabs(static_cast<double>(p.x.at(i, c)));
    }
    for (const WeightSegment& seg : p.weights->segments) {
      terms_.push_back(bound_terms(column_model(seg, K, p.walk, p.accumulator.u_eff), p.accumulator, p.lambda, K));
    }
  }

  void consume(const ReferenceBlock& b) override {
    using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const Index M = b.rows, K = p_.weights->k, w = b.width();
    RowMatrix alg(w, K);
    for (Index jj = 0; jj < w; ++jj) {
      decode_weight_row(*p_.weights, b.col_begin + jj, p_.x.dtype, nullptr, alg.row(jj).data(), nullptr, nullptr);
    }
    Eigen::Map<const RowMatrix> x(x_abs_.data(), M, K);
    const RowMatrix s64 = x * alg.transpose();
    RatioStats& st = stats_[static_cast<std::size_t>(b.index)];
    for (Index jj = 0; jj < w; ++jj) {
      const BoundTerms& t = terms_[segment_index(b.col_begin + jj)];
      for (Index i = 0; i < M; ++i) {
        const Index e = b.at(i, b.col_begin + jj);
        const double s_old = inflate_s(s64(i, jj), K);
        const double b_old = b.bound[e] - (t.gamma_acc + t.eps_coef) * (b.s[e] - s_old) * (1 + 0x1p-50);
        if (std::isfinite(b.bound[e]) && b_old > 0) st.add(b.bound[e] / b_old);
      }
    }
  }

  RatioStats total() const {
    RatioStats all;
    for (const RatioStats& s : stats_) all.merge(s);
    return all;
  }

 private:
  std::size_t segment_index(Index j) const {
    const auto& segs = p_.weights->segments;
    for (std::size_t s = 0; s < segs.size(); ++s) {
      if (j >= segs[s].row_begin && j < segs[s].row_end) return s;
    }
    return 0;
  }

  const LinearProblem& p_;
  std::vector<double> x_abs_;
  std::vector<BoundTerms> terms_;
  std::vector<RatioStats> stats_;
};

int run_bounds(const std::vector<std::string>& dumps) {
  RatioStats all;
  for (const std::string& path : dumps) {
    auto reader = certify::DumpReader::open(path);
    if (!reader.ok()) {
      std::fprintf(stderr, "%s: %s\n", path.c_str(), reader.status().to_string().c_str());
      continue;
    }
    for (const auto& info : reader->model().projections) {
      auto loaded = certify::load_projection(*reader, info);
      if (!loaded.ok()) {
        std::fprintf(stderr, "%s %s: %s\n", path.c_str(), info.name.c_str(), loaded.status().to_string().c_str());
        continue;
      }
      const LinearProblem problem = loaded->problem(10.0);
      ReferenceOptions ro;
      ro.emulate_walk = false;
      BoundRatioSink sink(problem, (info.n + ro.block_cols - 1) / ro.block_cols);
      auto s = evaluate_reference(problem, sink, ro);
      if (!s.ok()) {
        std::fprintf(stderr, "%s %s: %s\n", path.c_str(), info.name.c_str(), s.status().to_string().c_str());
        continue;
      }
      const RatioStats st = sink.total();
      if (st.n == 0) continue;
      std::printf("%-60s %-12s K=%-6ld elements %-9ld B_new/B_old max 1%+.3e mean 1%+.3e min 1%+.3e\n",
                  path.substr(path.size() > 60 ? path.size() - 60 : 0).c_str(), info.name.c_str(), (long)info.k,
                  (long)st.n, st.max - 1, st.sum / static_cast<double>(st.n) - 1, st.min - 1);
      all.merge(st);
    }
  }
  if (all.n == 0) return 1;
  std::printf("all: %ld elements, B_new/B_old max 1%+.3e mean 1%+.3e min 1%+.3e\n", (long)all.n, all.max - 1,
              all.sum / static_cast<double>(all.n) - 1, all.min - 1);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Benchmark of the exact reference (M 128, K 5120, N 16480; bf16 and AF4 weights) against an f64 GEMM of the "
      "same shape (Eigen, and OpenBLAS when built with it)"};
  int reps = 5, threads = omp_get_max_threads();
  std::vector<std::string> dumps;
  bool bounds = false;
  app.add_option("--reps", reps, "Interleaved repetitions; the ratios reported are their medians")
      ->check(bench::at_least(1));
  app.add_option("--threads", threads, "Threads of the reference and the GEMMs (default: OpenMP's)")
      ->check(bench::at_least(1));
  CLI::Option* bounds_flag = app.add_flag(
      "--bounds", bounds,
      "Instead of timing: for every projection of DUMP.h5..., B with S from the f32 GEMM against B with S from an "
      "f64 GEMM inflated by its error (max and mean of B_new / B_old)");
  bool s_block = false;
  CLI::Option* s_block_flag = app.add_flag(
      "--s-block", s_block,
      "Instead of the reference: S of one block on one thread, from bf16 magnitudes (the AVX512-BF16 instruction "
      "where built, the portable path) and by the f32 GEMM");
  s_block_flag->excludes(bounds_flag);
  CLI::Option* dumps_arg = app.add_option("DUMP.h5", dumps, "The dumps of --bounds");
  bounds_flag->needs(dumps_arg);
  dumps_arg->needs(bounds_flag);
  if (const std::optional<int> rc = bench::parse_command_line(app, argc, argv)) return *rc;
  omp_set_dynamic(0);
  omp_set_num_threads(threads);
  Eigen::setNbThreads(threads);
#if NCERT_BENCH_OPENBLAS
  openblas_set_num_threads(threads);
#endif
  if (bounds) return run_bounds(dumps);
  if (s_block) {
    omp_set_num_threads(1);
    Eigen::setNbThreads(1);
    return run_s_block(reps);
  }
  std::printf("bench_reference: M=%ld K=%ld N=%ld threads=%d reps=%d (interleaved)\n", (long)kM, (long)kK, (long)kN,
              threads, reps);
  return run_speed(reps);
}
