#include "certify/isolation/activity.h"

#include <time.h>

#include <algorithm>
#include <mutex>

namespace ncert::certify {

namespace {

std::atomic<ActivityPage*> g_page{nullptr};
std::mutex g_text_mutex;  // writers of the text; the reader is another process

void copy_text(char* dst, std::size_t cap, std::string_view s) {
  const std::size_t n = std::min(cap - 1, s.size());
  std::copy_n(s.data(), n, dst);
  dst[n] = '\0';
}

}  // namespace

std::int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void set_activity_page(ActivityPage* page) { g_page.store(page, std::memory_order_release); }

Hdf5Activity::Hdf5Activity(std::string_view action, std::string_view object)
    : page_(g_page.load(std::memory_order_acquire)) {
  if (!page_) return;
  {
    std::lock_guard<std::mutex> lock(g_text_mutex);
    page_->version.fetch_add(1, std::memory_order_acq_rel);
    copy_text(page_->action, sizeof page_->action, action);
    copy_text(page_->object, sizeof page_->object, object);
    page_->version.fetch_add(1, std::memory_order_acq_rel);
  }
  // Every entry and exit is progress: the watchdog measures time since the last one, so
  // threads that keep reading chunks in turn never look stuck, and one call that never
  // returns does.
  page_->since_ns.store(monotonic_ns(), std::memory_order_release);
  page_->depth.fetch_add(1, std::memory_order_acq_rel);
}

Hdf5Activity::~Hdf5Activity() {
  if (!page_) return;
  page_->since_ns.store(monotonic_ns(), std::memory_order_release);
  page_->depth.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace ncert::certify
