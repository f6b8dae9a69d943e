// Rendering for nodevolctl: aligned tables, "Key: value" blocks and JSON.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/map.h>
#include <google/protobuf/message.h>
#include <google/protobuf/repeated_ptr_field.h>

namespace nodevol::ctl {

// Columns separated by two spaces, padded to the widest cell; empty cells
// print as "-". Every cell is made Printable (printable.h).
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print(std::ostream& out) const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// "Key:  value" lines with the values aligned; empty values print as "-";
// keys and values are made Printable.
void PrintFields(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& fields);

// The message as proto3 JSON with every primitive field and the .proto field
// names; pretty-printed, or on one line when compact (stream messages).
void PrintJson(std::ostream& out, const google::protobuf::Message& message, bool compact = false);

// "a, b, c".
std::string Join(const google::protobuf::RepeatedPtrField<std::string>& items,
                 const char* separator = ", ");
// "k1=v1, k2=v2" sorted by key.
std::string Join(const google::protobuf::Map<std::string, std::string>& map);
// "2024-05-01T12:00:00Z" (UTC); "" for 0.
std::string FormatTime(int64_t unix_seconds);

}  // namespace nodevol::ctl
