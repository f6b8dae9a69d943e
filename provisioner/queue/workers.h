// Workers: N threads taking keys from a WorkQueue and reconciling them, with
// the reference provisioner's retry policy:
//  - kDone: the key is forgotten (its backoff resets);
//  - kRetry: the key is re-added rate-limited, unless it has already failed
//    `max_failures` times (0: no limit); then it is dropped WITHOUT being
//    forgotten, so it gets one more try, still counted, each time the object
//    changes and is added again (the library's "give up until it changes");
//  - kGiveUp: dropped the same way at once (a permanent error: no retry storm);
//  - kLater: not now, and not a failure: added again after `later` (1 s)
//    with its backoff untouched (e.g. its node is busy with other calls).
// An exception from `process` counts as kRetry. `gave_up` (optional) hears
// of both kinds of giving up, so the caller can keep the key given up until
// its object really changes (a periodic resync is not a change).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "queue/work_queue.h"

namespace nodevol {

class Workers {
 public:
  enum class Outcome { kDone, kRetry, kGiveUp, kLater };
  static constexpr std::chrono::seconds kLaterDelay{1};
  using Process = std::function<Outcome(const std::string& key)>;
  // `permanent`: kGiveUp (else: max_failures reached).
  using GaveUp = std::function<void(const std::string& key, bool permanent)>;

  // Starts `count` threads over `queue`, which must outlive this object.
  // `name` labels log lines ("claim", "volume").
  Workers(std::string name, WorkQueue* queue, int count, int max_failures, Process process,
          GaveUp gave_up = nullptr);
  // Shuts the queue down (letting running keys finish) and joins.
  ~Workers();
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;

  // Handles one key with the policy above; what each thread does in a loop.
  // Public so tests can step it. Returns false once the queue is shut down.
  static bool ProcessNext(const std::string& name, WorkQueue* queue, int max_failures, const Process& process,
                          const GaveUp& gave_up = nullptr);

 private:
  const std::string name_;
  WorkQueue* const queue_;
  std::vector<std::thread> threads_;
};

}  // namespace nodevol
