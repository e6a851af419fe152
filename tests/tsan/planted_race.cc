// The tsan preset's proof that ThreadSanitizer is live and sound over OpenMP (tests/tsan/
// CMakeLists.txt registers it only in a ThreadSanitizer build):
//   planted_race threads   two std::threads increment one plain counter: a data race that
//                          TSan must report (the test passes only on the report's text);
//   planted_race openmp    the same race inside an OpenMP team: reported the same way, so
//                          races in ncert's parallel regions are visible through libomp;
//   planted_race barrier   correct OpenMP: each thread writes its own slot, an `omp barrier`,
//                          then each reads every slot. Clean, and must stay unreported: TSan
//                          sees libomp's barrier only through the Archer tool's annotations
//                          (libarcher), so a report here means the setup is unsound and every
//                          verdict of the preset would be noise.
// The counters are long-lived globals so that the compiler cannot keep them in registers.
#include <omp.h>

#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr int kIncrements = 10'000;  // many accesses: the race is seen whatever the schedule
long g_counter = 0;

void racy_increment() {
  for (int i = 0; i < kIncrements; ++i) {
    g_counter = g_counter + 1;
  }
}

int race_threads() {
  std::thread a(racy_increment);
  std::thread b(racy_increment);
  a.join();
  b.join();
  std::printf("counter %ld\n", g_counter);
  return 0;
}

int race_openmp() {
#pragma omp parallel num_threads(2)
  racy_increment();
  std::printf("counter %ld\n", g_counter);
  return 0;
}

int barrier_clean() {
  constexpr int kThreads = 2;
  std::vector<long> slots(kThreads, 0);
  int team = 0;
  long checks = 0;
#pragma omp parallel num_threads(kThreads) reduction(+ : checks)
  {
    const int me = omp_get_thread_num();
    if (me == 0) team = omp_get_num_threads();
    slots[static_cast<std::size_t>(me)] = 1000 + me;
#pragma omp barrier
    for (int t = 0; t < omp_get_num_threads(); ++t) {
      checks += slots[static_cast<std::size_t>(t)];
    }
  }
  // Each of the `team` threads read every slot: team * (1000 + 1001 + ...).
  long expected = 0;
  for (int t = 0; t < team; ++t) expected += team * (1000L + t);
  std::printf("team %d, checks %ld (expected %ld)\n", team, checks, expected);
  return team == kThreads && checks == expected ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "threads") == 0) return race_threads();
  if (argc == 2 && std::strcmp(argv[1], "openmp") == 0) return race_openmp();
  if (argc == 2 && std::strcmp(argv[1], "barrier") == 0) return barrier_clean();
  std::fprintf(stderr, "usage: planted_race threads|openmp|barrier\n");
  return 2;
}
