#include "kube/watch_decoder.h"

namespace nodevol::kube {
namespace {

bool IsJsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

bool ParseType(std::string_view s, WatchEvent::Type* type) {
  using T = WatchEvent::Type;
  if (s == "ADDED") *type = T::kAdded;
  else if (s == "MODIFIED") *type = T::kModified;
  else if (s == "DELETED") *type = T::kDeleted;
  else if (s == "BOOKMARK") *type = T::kBookmark;
  else if (s == "ERROR") *type = T::kError;
  else return false;
  return true;
}

}  // namespace

std::string WatchEvent::ResourceVersion() const {
  if (!object.is_object()) return "";
  auto md = object.find("metadata");
  if (md == object.end() || !md->is_object()) return "";
  auto rv = md->find("resourceVersion");
  if (rv == md->end() || !rv->is_string()) return "";
  return rv->get<std::string>();
}

std::string_view WatchEventTypeName(WatchEvent::Type type) {
  switch (type) {
    case WatchEvent::Type::kAdded: return "ADDED";
    case WatchEvent::Type::kModified: return "MODIFIED";
    case WatchEvent::Type::kDeleted: return "DELETED";
    case WatchEvent::Type::kBookmark: return "BOOKMARK";
    case WatchEvent::Type::kError: return "ERROR";
  }
  return "UNKNOWN";
}

Status WatchDecoder::Fail(std::string message) {
  error_ = Status::InvalidArgument("malformed watch stream: " + std::move(message));
  buf_.clear();
  return error_;
}

Status WatchDecoder::Feed(std::string_view bytes, std::vector<WatchEvent>* out) {
  if (!error_.ok()) return error_;
  size_t i = 0;
  while (i < bytes.size()) {
    if (buf_.empty()) {
      // Between objects: skip whitespace; the next object must start with '{'.
      char c = bytes[i];
      if (IsJsonSpace(c)) {
        ++i;
        continue;
      }
      if (c != '{') return Fail(std::string("expected '{' between events, got '") + c + "'");
    }
    // Scan as far as the end of the current object or of the chunk.
    size_t start = i;
    bool complete = false;
    for (; i < bytes.size(); ++i) {
      char c = bytes[i];
      if (in_string_) {
        if (escape_) escape_ = false;
        else if (c == '\\') escape_ = true;
        else if (c == '"') in_string_ = false;
        continue;
      }
      if (c == '"') {
        in_string_ = true;
      } else if (c == '{' || c == '[') {
        ++depth_;
      } else if (c == '}' || c == ']') {
        if (--depth_ == 0) {
          ++i;
          complete = true;
          break;
        }
        if (depth_ < 0) return Fail("unbalanced brackets");
      }
    }
    buf_.append(bytes.substr(start, i - start));
    if (!complete) break;
    WatchEvent event;
    Status st = DecodeEvent(buf_, &event);
    buf_.clear();
    if (!st.ok()) return Fail(st.message());
    out->push_back(std::move(event));
  }
  return Status::Ok();
}

Status WatchDecoder::DecodeEvent(std::string_view text, WatchEvent* event) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("event is not valid JSON: " + std::string(text.substr(0, 120)));
  auto type = j.find("type");
  if (type == j.end() || !type->is_string()) return Status::InvalidArgument("event without a \"type\" string");
  if (!ParseType(type->get<std::string>(), &event->type)) {
    return Status::InvalidArgument("unknown event type \"" + type->get<std::string>() + "\"");
  }
  auto object = j.find("object");
  if (object == j.end() || !object->is_object()) return Status::InvalidArgument("event without an \"object\"");
  event->object = std::move(*object);
  if (event->type == WatchEvent::Type::kError) event->error = Result::FromStatusObject(event->object);
  return Status::Ok();
}

Status WatchDecoder::Finish() const {
  if (!error_.ok()) return error_;
  if (!buf_.empty()) {
    return Status::InvalidArgument("watch stream ended inside an event (" + std::to_string(buf_.size()) + " bytes)");
  }
  return Status::Ok();
}

}  // namespace nodevol::kube
