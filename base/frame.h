// Frames: the flex door's wire format (proto/nodevol/v1/flex_door.proto):
// a 4-byte big-endian length, then that many bytes. Both ends use these,
// on a blocking socket whose SO_RCVTIMEO/SO_SNDTIMEO bound each wait.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace nodevol {

// The largest frame either end accepts.
inline constexpr size_t kMaxFrame = 1 << 20;

enum class FrameResult {
  kOk,
  kEof,       // the peer closed before the first byte of a frame
  kTooLarge,  // the length says more than max bytes
  kTimeout,   // a wait ran past the socket's timeout
  kError,     // the connection broke (errno says how), or closed mid-frame
};

// Reads one frame into *out.
FrameResult ReadFrame(int fd, size_t max, std::string* out);
// Writes one frame (all of it, or kTimeout/kError).
FrameResult WriteFrame(int fd, std::string_view payload);

}  // namespace nodevol
