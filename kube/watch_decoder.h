// WatchDecoder: turns the body of a watch response, received in chunks of
// any size, into complete watch events.
//
// The apiserver streams one JSON object {"type": ..., "object": ...} per
// event. Chunk boundaries are arbitrary: an event may span chunks and a
// chunk may hold several events, with whitespace (newlines) between them.
// Objects are found by scanning brace depth outside JSON strings, so the
// decoder never depends on newlines and scans each byte once however the
// body is split. Pure: no I/O, no threads.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "kube/result.h"

namespace nodevol::kube {

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark, kError };
  Type type = Type::kAdded;
  // The object; for kBookmark only metadata.resourceVersion is meaningful;
  // for kError a Status object.
  nlohmann::json object;
  // For kError: the Status classified (410 → Result::Code::kExpired).
  Result error;

  // object.metadata.resourceVersion, or "" (not for kError).
  std::string ResourceVersion() const;
};

std::string_view WatchEventTypeName(WatchEvent::Type type);

class WatchDecoder {
 public:
  // Consumes `bytes` and appends every event completed by them to `*out`.
  // Returns INVALID_ARGUMENT on malformed input (not JSON, not an object, a
  // missing or unknown type, a missing object); the decoder is then broken
  // and keeps returning that error.
  Status Feed(std::string_view bytes, std::vector<WatchEvent>* out);
  // At the end of the stream: INVALID_ARGUMENT if a partial event is left.
  Status Finish() const;

 private:
  Status Fail(std::string message);
  Status DecodeEvent(std::string_view text, WatchEvent* event);

  std::string buf_;      // bytes of the current, incomplete object
  int depth_ = 0;        // brace/bracket depth at the end of buf_
  bool in_string_ = false;
  bool escape_ = false;
  Status error_;
};

}  // namespace nodevol::kube
