// FifoWitness: counts how often anyone opens a FIFO for reading. A writer
// thread opens the FIFO through a hard link of its own and blocks there
// until a reader opens it; each time it gets through, a reader opened it.
// For tests of code that must never open what a pod or a server put at a
// name (fs/open_untrusted.h): an O_PATH open does not count, a read-only
// open (even O_NONBLOCK) does.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

namespace nodevol::testing {

class FifoWitness {
 public:
  // Makes the FIFO at `path` and a hard link to it at `link` (outside the
  // tree under test, so the writer finds it whatever name it has there).
  FifoWitness(const std::string& path, const std::string& link) : link_(link) {
    ok_ = ::mkfifo(path.c_str(), 0600) == 0 && ::link(path.c_str(), link.c_str()) == 0;
    if (ok_) writer_ = std::thread([this] {
        while (!stop_) {
          int fd = ::open(link_.c_str(), O_WRONLY | O_CLOEXEC);  // blocks until a reader opens it
          if (fd < 0) continue;
          if (!stop_) ++opens_;
          ::close(fd);
        }
      });
  }
  ~FifoWitness() { Stop(); }
  bool ok() const { return ok_; }
  // Opens so far; Stop first for the final count.
  int opens() const { return opens_.load(); }
  // Releases the writer with a read of its own (not counted) and joins it.
  void Stop() {
    if (!writer_.joinable()) return;
    stop_ = true;
    int fd = ::open(link_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    writer_.join();
    if (fd >= 0) ::close(fd);
  }

 private:
  std::string link_;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<int> opens_{0};
  std::thread writer_;
};

}  // namespace nodevol::testing
