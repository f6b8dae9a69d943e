#include "base/frame.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstdint>

namespace nodevol {
namespace {

// Fills buf[0, n); kEof only when nothing was read and the peer closed.
FrameResult ReadAll(int fd, char* buf, size_t n, bool first) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::recv(fd, buf + got, n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return first && got == 0 ? FrameResult::kEof : FrameResult::kError;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? FrameResult::kTimeout : FrameResult::kError;
  }
  return FrameResult::kOk;
}

}  // namespace

FrameResult ReadFrame(int fd, size_t max, std::string* out) {
  unsigned char h[4];
  if (FrameResult r = ReadAll(fd, reinterpret_cast<char*>(h), 4, true); r != FrameResult::kOk) return r;
  uint32_t len = uint32_t{h[0]} << 24 | uint32_t{h[1]} << 16 | uint32_t{h[2]} << 8 | h[3];
  if (len > max) return FrameResult::kTooLarge;
  out->resize(len);
  return ReadAll(fd, out->data(), len, false);
}

FrameResult WriteFrame(int fd, std::string_view payload) {
  if (payload.size() > kMaxFrame) return FrameResult::kTooLarge;
  auto len = static_cast<uint32_t>(payload.size());
  std::string buf{static_cast<char>(len >> 24), static_cast<char>(len >> 16), static_cast<char>(len >> 8),
                  static_cast<char>(len)};
  buf.append(payload);
  size_t sent = 0;
  while (sent < buf.size()) {
    // MSG_NOSIGNAL: a peer gone mid-answer is an error, not a SIGPIPE.
    ssize_t w = ::send(fd, buf.data() + sent, buf.size() - sent, MSG_NOSIGNAL);
    if (w > 0) {
      sent += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    return w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? FrameResult::kTimeout : FrameResult::kError;
  }
  return FrameResult::kOk;
}

}  // namespace nodevol
