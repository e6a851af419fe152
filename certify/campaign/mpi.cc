// Work items across MPI ranks: rank 0 schedules (largest estimated cost first, at projection
// granularity) and journals; every other rank runs the items it is handed, each in an isolated
// child, reading its inputs itself (a shared filesystem), and sends the result back. Without
// MPI (ncert built without OpenMPI, or started without a launcher) everything runs locally.
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <deque>
#include <map>
#include <thread>

#include "certify/campaign/detail/executors.h"

#ifdef NCERT_HAVE_MPI
#include <mpi.h>
#endif

namespace ncert::certify {

namespace {

/// Started by a launcher with more than one rank (OpenMPI's, or any PMI/PMIx one).
bool launched_with_ranks() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    if (const char* s = std::getenv(v); s && std::atoi(s) > 1) return true;
  }
  return false;
}

[[maybe_unused]] bool g_mpi_started = false;

}  // namespace

#ifdef NCERT_HAVE_MPI

namespace {

constexpr int kTagWork = 1, kTagResult = 2, kTagStop = 3;

void send_text(const std::string& s, int to, int tag) {
  MPI_Send(s.data(), static_cast<int>(s.size()), MPI_CHAR, to, tag, MPI_COMM_WORLD);
}

std::string recv_text(int from, int tag, MPI_Status* st) {
  MPI_Probe(from, tag, MPI_COMM_WORLD, st);
  int n = 0;
  MPI_Get_count(st, MPI_CHAR, &n);
  std::string s(static_cast<std::size_t>(n), '\0');
  MPI_Recv(s.data(), n, MPI_CHAR, st->MPI_SOURCE, st->MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return s;
}

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

}  // namespace

void mpi_start(int* argc, char*** argv) {
  if (!launched_with_ranks()) return;
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  g_mpi_started = true;
  // OpenMPI installs handlers that print a backtrace on SIGSEGV and friends; the isolated
  // children inherit them, and a corrupt file that crashes libhdf5 there is an expected,
  // reported outcome, not a rank failure to dump a backtrace for.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, SIG_DFL);
}

void mpi_stop() {
  if (g_mpi_started) MPI_Finalize();
  g_mpi_started = false;
}

bool mpi_available() { return g_mpi_started && world_size() > 1; }
int mpi_worker_ranks() { return mpi_available() ? world_size() - 1 : 0; }
bool mpi_is_root() { return !g_mpi_started || world_rank() == 0; }

int run_campaign_worker(const CampaignOptions& o) {
  auto manifest = campaign_manifest(o);
  for (;;) {
    MPI_Status st;
    for (int flag = 0; !flag;) {  // idle without spinning (see run_items_mpi)
      MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
      if (!flag) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (st.MPI_TAG == kTagStop) {
      MPI_Recv(nullptr, 0, MPI_CHAR, 0, kTagStop, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      return 0;
    }
    const std::string text = recv_text(0, kTagWork, &st);
    Json reply;
    auto item = work_item_from_json(Json::parse(text));
    double seconds = 0;
    if (!manifest.ok()) {
      reply = Json{{"key", item.ok() ? item->key : ""}, {"seconds", 0}, {"result", error_result(manifest.status())}};
    } else if (!item.ok()) {
      reply = Json{{"key", ""}, {"seconds", 0}, {"result", error_result(item.status())}};
    } else {
      const Json result = detail::run_item_isolated(*manifest, o, *item, &seconds);
      reply = Json{{"key", item->key}, {"seconds", seconds}, {"result", result}};
    }
    send_text(reply.dump(), 0, kTagResult);
  }
}

namespace detail {

Status run_items_mpi(const Manifest&, const CampaignOptions&, CampaignRun& run, const Recorder& record,
                     int* stop_signal) {
  // Rank 0's stops noted, for its 1 ms wait to see: by the default action it died without the
  // "campaign interrupted" line a local campaign prints (a review's). Rank 0 ends after this
  // loop, by the signal or with its report, so the handler stays.
  hold_stops_for_the_supervisor();
  const int n = world_size();
  std::deque<int> idle;
  for (int r = 1; r < n; ++r) idle.push_back(r);
  int busy = 0;
  Status failure;
  while (failure.ok() && !run.done()) {
    // Hand out work while there is both an idle rank and a pending item.
    while (!idle.empty()) {
      auto item = run.next();
      if (!item) break;
      send_text(work_item_json(*item).dump(), idle.front(), kTagWork);
      idle.pop_front();
      ++busy;
    }
    if (busy == 0) {
      failure = Status(ErrorCode::kInternal, "campaign: items remain but none can start");
      break;
    }
    // Wait without spinning: OpenMPI's blocking probe busy-polls a core that the workers on
    // this node need (rank 0 only schedules). A result is checked for every millisecond.
    MPI_Status st;
    for (int flag = 0; !flag;) {
      if (const int sig = stop_received(); sig != 0) {
        // The workers' items are lost with them: the launcher ends every rank once rank 0
        // ends by the signal (cmd_campaign's end_by_signal).
        if (stop_signal) *stop_signal = sig;
        return Status(ErrorCode::kInterrupted, "campaign interrupted by " + signal_name(sig) +
                                                   ": finished items are in the journal; --resume continues");
      }
      MPI_Iprobe(MPI_ANY_SOURCE, kTagResult, MPI_COMM_WORLD, &flag, &st);
      if (!flag) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const std::string text = recv_text(st.MPI_SOURCE, kTagResult, &st);
    --busy;
    idle.push_back(st.MPI_SOURCE);
    const Json reply = Json::parse(text);
    failure = record(reply.at("key").get<std::string>(), reply.at("result"), reply.at("seconds").get<double>());
  }
  // Collect what is still running (after a failure), then release every worker.
  while (busy > 0) {
    MPI_Status st;
    recv_text(MPI_ANY_SOURCE, kTagResult, &st);
    --busy;
  }
  for (int r = 1; r < n; ++r) MPI_Send(nullptr, 0, MPI_CHAR, r, kTagStop, MPI_COMM_WORLD);
  return failure;
}

}  // namespace detail

#else  // NCERT_HAVE_MPI

void mpi_start(int*, char***) {}
void mpi_stop() {}
bool mpi_available() { return false; }
int mpi_worker_ranks() { return 0; }
bool mpi_is_root() { return true; }
int run_campaign_worker(const CampaignOptions&) { return 0; }

namespace detail {

Status run_items_mpi(const Manifest&, const CampaignOptions&, CampaignRun&, const Recorder&, int*) {
  return Status(ErrorCode::kUsage, launched_with_ranks() ? "this ncert was built without MPI (OpenMPI not found)"
                                                         : "not started by an MPI launcher");
}

}  // namespace detail

#endif  // NCERT_HAVE_MPI

}  // namespace ncert::certify
