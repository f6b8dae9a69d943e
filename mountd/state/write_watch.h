// WriteWatch: which writes to the state directory are running, and since
// when. A write to a disk that stopped answering does not return (no
// deadline interrupts a thread waiting in fsync), and nor does the call
// that made it; the oldest write still running is how nodevold says so
// (/healthz, the CSI Probe, the log) instead of hanging in silence.
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace nodevol {

class WriteWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // A write in progress from construction to destruction.
  class Scope {
   public:
    Scope(WriteWatch* watch, std::string what);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    WriteWatch* watch_;
    uint64_t id_;
  };

  // How long the oldest write still running has run, and *what it writes;
  // zero (and *what untouched) when none is.
  std::chrono::milliseconds Oldest(std::string* what) const;

 private:
  struct Write {
    Clock::time_point start;
    std::string what;
  };
  mutable std::mutex mu_;
  uint64_t next_ = 0;
  std::map<uint64_t, Write> running_;  // by id: the lowest is the oldest
};

}  // namespace nodevol
