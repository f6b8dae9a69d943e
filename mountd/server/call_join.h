// CallJoin: a retry of a call still in flight waits for that call's answer
// instead of queueing behind it and doing the work again.
//
// kubelet repeats a publish whose answer did not come in time (a hung
// disk, a slow mkfs, a big fsGroup walk) every few seconds, and the
// provisioner repeats a create. Each repeat would otherwise wait at the
// target's or volume's lock (node/lock_table.h) and, once the first call
// finished, run again. Here it joins: the first call's answer, status and
// response, is the repeat's answer too, the moment it exists.
//
// Joined only when the request is the same to the byte (protobuf's
// deterministic serialization) for the same method on the same front
// door (one CallJoin per CallRunner, one CallRunner per listener): every
// call joined here is idempotent, so the first one's answer is the right
// one for the repeat. A request that differs in any field (read-only, a
// mount flag, a deadline carried outside the message) waits at the lock
// as before and gets its own answer.
//
// A joiner waits until its own deadline (CallScope) and then gets
// DEADLINE_EXCEEDED naming the call it joined; the first call goes on.
// When the first call itself ended at its deadline while the joiner still
// has time, the joiner runs the call itself: a later caller is never cut
// short by an earlier caller's patience. Answers are not kept once the
// flight lands: a later call runs anew.
#pragma once

#include <google/protobuf/message.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"

namespace nodevol {

class CallJoin {
 public:
  // The key of a call: its method and request bytes.
  static std::string Key(const char* method, const google::protobuf::Message& request);

  // Runs fn (which fills *response), or waits for the identical call in
  // flight under `key` and copies its answer into *response (*joined).
  Status Run(const std::string& key, google::protobuf::Message* response, const std::function<Status()>& fn,
             bool* joined);

  // How many callers wait for the flight under key right now (tests).
  int Joiners(const std::string& key);
  // How many calls ran joined since the start (tests, logs).
  long joined() const { return joined_.load(); }

 private:
  struct Flight {
    bool done = false;
    Status status;
    std::unique_ptr<google::protobuf::Message> response;
    int joiners = 0;
    std::chrono::steady_clock::time_point since;
  };

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<Flight>> flights_;
  std::atomic<long> joined_{0};
};

}  // namespace nodevol
