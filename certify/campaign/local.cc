// Work items on this machine: isolated children, `workers` at a time, one event loop.
#include <chrono>
#include <map>

#include "certify/campaign/detail/executors.h"
#include "certify/report/progress.h"

namespace ncert::certify::detail {

Json job_result(const IsolatedJobs::Done& done, const IsolationOptions& isolation) {
  if (done.end.kind == ChildEnd::Kind::kExited && done.end.exit_code == 0) {
    try {
      return Json::parse(done.output);
    } catch (const Json::exception&) {
      return error_result(Status(ErrorCode::kInternal, "a work item returned a malformed result"));
    }
  }
  if (done.end.kind == ChildEnd::Kind::kExited) {
    return error_result(
        Status(ErrorCode::kInternal, "a work item exited with status " + std::to_string(done.end.exit_code)));
  }
  return error_result(child_end_status(done.end, isolation));
}

Json run_item_isolated(const Manifest& manifest, const CampaignOptions& o, const WorkItem& item, double* seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  auto body = [&] { return run_work_item(manifest, o.settings, item).dump(); };
  Json result;
  if (!o.isolation.enabled) {
    result = Json::parse(body());
  } else {
    IsolatedJobs jobs(o.isolation);
    auto id = jobs.start(body);
    if (!id.ok()) {
      result = error_result(id.status());
    } else {
      auto done = jobs.wait_any();
      result = done.ok() ? job_result(*done, o.isolation) : error_result(done.status());
    }
  }
  *seconds = seconds_since(t0);
  return result;
}

Status run_items_local(const Manifest& manifest, const CampaignOptions& o, CampaignRun& run, const Recorder& record,
                       int* stop_signal) {
  if (!o.isolation.enabled) {
    // In-process (a debugger): one item after another.
    while (auto item = run.next()) {
      double seconds = 0;
      const Json result = run_item_isolated(manifest, o, *item, &seconds);
      NCERT_RETURN_IF_ERROR(record(item->key, result, seconds));
    }
    return Status();
  }
  IsolatedJobs jobs(o.isolation);
  struct Running {
    WorkItem item;
    std::chrono::steady_clock::time_point start;
  };
  std::map<int, Running> running;
  Progress progress("campaign: work items", static_cast<std::int64_t>(run.items_total()));
  while (!run.done()) {
    while (jobs.running() < o.workers) {
      auto item = run.next();
      if (!item) break;
      const WorkItem w = *item;
      auto id = jobs.start([&manifest, &o, w] { return run_work_item(manifest, o.settings, w).dump(); });
      if (!id.ok()) return id.status();
      running[*id] = Running{w, std::chrono::steady_clock::now()};
    }
    if (jobs.running() == 0) {
      return Status(ErrorCode::kInternal, "campaign: items remain but none can start");
    }
    NCERT_ASSIGN_OR_RETURN(IsolatedJobs::Done done, jobs.wait_any());
    const Running r = running.at(done.id);
    running.erase(done.id);
    if (done.end.kind == ChildEnd::Kind::kInterrupted) {
      if (stop_signal) *stop_signal = done.end.signal;
      return Status(ErrorCode::kInterrupted, "campaign interrupted by " + signal_name(done.end.signal) +
                                                 ": finished items are in the journal; --resume continues");
    }
    NCERT_RETURN_IF_ERROR(record(r.item.key, job_result(done, o.isolation), seconds_since(r.start)));
    progress.reach(static_cast<std::int64_t>(run.items_finished()));  // a batch counts its units
  }
  return Status();
}

}  // namespace ncert::certify::detail
