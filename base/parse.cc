#include "base/parse.h"

#include <algorithm>
#include <charconv>
#include <string>

namespace nodevol {

Status ParseUint(std::string_view what, std::string_view text, uint64_t max, uint64_t* out, int base) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, base);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v > max)
    return Status::InvalidArgument(std::string(what) + " \"" + std::string(text) + "\" is not " +
                                   (base == 8 ? "an octal" : "a") + " number from 0 to " +
                                   std::to_string(max));
  *out = v;
  return Status::Ok();
}

Status ParseNameList(std::string_view what, std::string_view text, std::vector<std::string>* out) {
  out->clear();
  for (size_t at = 0; at <= text.size();) {
    size_t comma = std::min(text.find(',', at), text.size());
    std::string_view name = text.substr(at, comma - at);
    if (name.empty() || name.find_first_of(" \t") != std::string_view::npos)
      return Status::InvalidArgument(std::string(what) + " \"" + std::string(text) +
                                     "\": want names separated by commas, e.g. a,b");
    out->emplace_back(name);
    at = comma + 1;
  }
  return Status::Ok();
}

}  // namespace nodevol
