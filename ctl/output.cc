#include "output.h"

#include <algorithm>
#include <ctime>
#include <map>
#include <stdexcept>

#include <google/protobuf/util/json_util.h>

#include "printable.h"

namespace nodevol::ctl {

void Table::Print(std::ostream& out) const {
  // Escaped before measuring: the padding is for what the terminal shows.
  std::vector<std::vector<std::string>> rows;
  for (const auto& row : rows_) {
    rows.emplace_back();
    for (const auto& cell : row) rows.back().push_back(Printable(cell));
  }
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], std::max<size_t>(row[i].size(), 1));
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string& cell = row[i].empty() ? std::string("-") : row[i];
      line += cell;
      if (i + 1 < row.size()) line += std::string(widths[i] - cell.size() + 2, ' ');
    }
    out << line << '\n';
  }
}

void PrintFields(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& fields) {
  size_t width = 0;
  for (const auto& [key, value] : fields) width = std::max(width, Printable(key).size());
  for (const auto& [key, value] : fields) {
    std::string k = Printable(key);
    out << k << ':' << std::string(width - k.size() + 2, ' ') << (value.empty() ? "-" : Printable(value)) << '\n';
  }
}

void PrintJson(std::ostream& out, const google::protobuf::Message& message, bool compact) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  options.add_whitespace = !compact;
  std::string json;
  if (auto status = google::protobuf::util::MessageToJsonString(message, &json, options); !status.ok()) {
    throw std::runtime_error("cannot render " + message.GetTypeName() + " as JSON: " + status.ToString());
  }
  if (json.empty() || json.back() != '\n') json += '\n';
  out << json;
}

std::string Join(const google::protobuf::RepeatedPtrField<std::string>& items, const char* separator) {
  std::string joined;
  for (const auto& item : items) joined += (joined.empty() ? "" : separator) + item;
  return joined;
}

std::string Join(const google::protobuf::Map<std::string, std::string>& map) {
  std::map<std::string, std::string> sorted(map.begin(), map.end());
  std::string joined;
  for (const auto& [key, value] : sorted) joined += (joined.empty() ? "" : ", ") + key + "=" + value;
  return joined;
}

std::string FormatTime(int64_t unix_seconds) {
  if (unix_seconds == 0) return "";
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  char buf[32];
  if (gmtime_r(&t, &tm) == nullptr || std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
    return std::to_string(unix_seconds);
  }
  return buf;
}

}  // namespace nodevol::ctl
