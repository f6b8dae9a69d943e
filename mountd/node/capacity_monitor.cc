#include "node/capacity_monitor.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace nodevol {
namespace {

// Free space on a shared filesystem moves with every write; a change below
// 1 MiB or 0.1% of the pool is noise, not news for the provisioner.
bool Significant(const std::vector<PoolCapacityView>& a, const std::vector<PoolCapacityView>& b) {
  if (a.size() != b.size()) return true;
  for (size_t i = 0; i < a.size(); ++i) {
    PoolCapacityView x = a[i], y = b[i];
    uint64_t d = x.free_bytes > y.free_bytes ? x.free_bytes - y.free_bytes : y.free_bytes - x.free_bytes;
    uint64_t noise = std::max<uint64_t>(1 << 20, x.total_bytes / 1000);
    x.free_bytes = y.free_bytes = 0;
    if (!(x == y) || d >= noise) return true;
  }
  return false;
}

}  // namespace

CapacityMonitor::CapacityMonitor(Node* node, std::chrono::milliseconds poll, Listener on_sample)
    : node_(node), poll_(poll), on_sample_(std::move(on_sample)) {}

CapacityMonitor::~CapacityMonitor() { Stop(); }

void CapacityMonitor::Start() {
  // The first sample too on the thread: a pool whose figures come from a
  // server (NFS) may wait for it, and nodevold's start must not.
  thread_ = std::thread([this] {
    Sample(false);
    Loop();
  });
}

void CapacityMonitor::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopped_ = true;
  }
  wake_.notify_all();
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t CapacityMonitor::Poke() {
  uint64_t next;
  {
    std::lock_guard<std::mutex> l(mu_);
    poked_ = true;
    next = started_ + 1;
  }
  wake_.notify_all();
  return next;
}

void CapacityMonitor::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stopped_) {
    wake_.wait_for(l, poll_, [this] { return stopped_ || poked_; });
    if (stopped_) break;
    bool poked = poked_;
    poked_ = false;
    l.unlock();
    Sample(poked);
    l.lock();
  }
}

void CapacityMonitor::Sample(bool poked) {
  uint64_t number;
  {
    std::lock_guard<std::mutex> l(mu_);
    number = ++started_;
  }
  std::vector<PoolCapacityView> now;
  Status st = node_->GetCapacity("", &now);
  if (!st.ok()) {
    spdlog::warn("capacity sample failed: {}", st.ToString());
    std::lock_guard<std::mutex> l(mu_);
    owed_ = owed_ || poked;  // the next sample that succeeds is news
    return;
  }
  if (on_sample_) on_sample_(now);
  std::lock_guard<std::mutex> l(mu_);
  // Samples run one at a time on this thread, so numbers finish in order.
  sample_ = number;
  // A poked sample is always news: its number was promised to a caller
  // (Poke), and a stream must carry it even when an earlier sample already
  // saw the change, or the provisioner keeps counting the new volume as
  // promised on top of the figures until the next heartbeat.
  if (version_ != 0 && !poked && !owed_ && !Significant(now, figures_)) return;
  owed_ = false;
  figures_ = std::move(now);
  ++version_;
  changed_.notify_all();
}

uint64_t CapacityMonitor::Snapshot(std::vector<PoolCapacityView>* out, uint64_t* sample) const {
  std::lock_guard<std::mutex> l(mu_);
  *out = figures_;
  if (sample) *sample = sample_;
  return version_;
}

bool CapacityMonitor::WaitChange(uint64_t seen, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> l(mu_);
  changed_.wait_for(l, timeout, [&] { return stopped_ || version_ != seen; });
  return !stopped_;
}

}  // namespace nodevol
