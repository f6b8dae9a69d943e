// CapacityMonitor: samples every pool's capacity on its own thread (and at
// once when poked after a volume change), keeps the latest figures with a
// version number, and wakes WatchCapacity streams when they change.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "node/node.h"

namespace nodevol {

class CapacityMonitor {
 public:
  using Listener = std::function<void(const std::vector<PoolCapacityView>&)>;

  // on_sample (may be empty) sees every sample, e.g. to export metrics.
  CapacityMonitor(Node* node, std::chrono::milliseconds poll, Listener on_sample);
  ~CapacityMonitor();  // Stops.

  // Starts the thread, which samples at once (Snapshot's version stays 0
  // until that first sample is in).
  void Start();
  // Wakes every waiter for good. Idempotent.
  void Stop();
  // Asks for a sample now (after a create, delete or expand); returns the
  // number of the first sample that begins after this call, so whose
  // figures include every change made before it.
  uint64_t Poke();

  // Latest figures and their version (0 before the first sample); *sample
  // (optional): the number of the latest sample, which took or confirmed
  // them (samples are numbered from 1; a periodic sample that changes
  // nothing significant confirms the figures without a new version, a
  // poked one always makes a new version).
  uint64_t Snapshot(std::vector<PoolCapacityView>* out, uint64_t* sample = nullptr) const;
  // Blocks until the version differs from `seen`, the timeout passes, or
  // Stop(); returns false once stopped.
  bool WaitChange(uint64_t seen, std::chrono::milliseconds timeout) const;

 private:
  void Loop();
  void Sample(bool poked);

  Node* const node_;
  const std::chrono::milliseconds poll_;
  Listener on_sample_;
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;  // waiters of WaitChange
  std::condition_variable wake_;              // the sampling thread
  bool stopped_ = false;
  bool poked_ = false;
  bool owed_ = false;  // a poked sample failed: publish the next one
  uint64_t version_ = 0;
  uint64_t started_ = 0;  // samples begun
  uint64_t sample_ = 0;   // the latest sample finished
  std::vector<PoolCapacityView> figures_;
  std::thread thread_;
};

}  // namespace nodevol
