// Helpers shared by the fuzz targets (tests/fuzz/README.md).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace nodevol::fuzz {

// A property of the code under test does not hold: report and crash, so
// libFuzzer keeps the input as a finding.
[[noreturn]] inline void Broken(std::string_view what) {
  std::fprintf(stderr, "PROPERTY BROKEN: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}
#define FUZZ_CHECK(cond, what) \
  do {                         \
    if (!(cond)) ::nodevol::fuzz::Broken(what); \
  } while (0)

// The input as a file, for code that reads a path (a mountinfo, a config
// file): a memfd named by /proc/self/fd/N, gone with the object.
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) : fd_(::memfd_create("fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) Broken("memfd_create failed");
    for (size_t done = 0; done < size;) {
      ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0) Broken("write to memfd failed");
      done += static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

}  // namespace nodevol::fuzz
