#include "config.h"

#include "base/po_error.h"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <fstream>

#include <boost/program_options.hpp>

namespace nodevol::flex {
namespace po = boost::program_options;

bool ParseDuration(const std::string& text, std::chrono::milliseconds* out) {
  std::string_view digits = text;
  uint64_t scale = 1000;
  if (digits.ends_with("ms")) {
    digits.remove_suffix(2);
    scale = 1;
  } else if (digits.ends_with("s")) {
    digits.remove_suffix(1);
  }
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || n == 0 ||
      n > 24ull * 3600 * 1000 / scale)
    return false;
  *out = std::chrono::milliseconds(n * scale);
  return true;
}

namespace {

bool Duration(const std::string& where, const std::string& text, std::chrono::milliseconds* out,
              std::string* error) {
  if (ParseDuration(text, out)) return true;
  *error = where + ": invalid duration \"" + text + "\"; expected e.g. 30s, 500ms or 30";
  return false;
}

bool ReadFile(const std::string& path, bool required, Config* c, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    if (!required && errno == ENOENT) return true;
    *error = "cannot read " + path;
    return false;
  }
  std::string socket, timeout, connect_timeout;
  po::options_description desc;
  desc.add_options()("socket", po::value(&socket))("timeout", po::value(&timeout))(
      "connect-timeout", po::value(&connect_timeout));
  po::variables_map vm;
  try {
    po::store(po::parse_config_file(in, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    *error = path + ": " + PoErrorText(e) + " (known keys: socket, timeout, connect-timeout)";
    return false;
  }
  if (vm.count("socket")) c->socket = socket;
  if (vm.count("timeout") && !Duration(path + ": timeout", timeout, &c->timeout, error)) return false;
  if (vm.count("connect-timeout") &&
      !Duration(path + ": connect-timeout", connect_timeout, &c->connect_timeout, error))
    return false;
  return true;
}

}  // namespace

bool LoadConfig(Config* c, std::string* error) {
  const char* file = std::getenv("NODEVOL_FLEX_CONFIG");
  if (!ReadFile(file ? file : kDefaultConfigFile, /*required=*/false, c, error)) return false;
  if (const char* s = std::getenv("NODEVOL_FLEX_SOCKET"); s && *s) c->socket = s;
  if (const char* t = std::getenv("NODEVOL_FLEX_TIMEOUT"); t && *t)
    if (!Duration("NODEVOL_FLEX_TIMEOUT", t, &c->timeout, error)) return false;
  if (c->socket.empty() || c->socket[0] != '/') {
    *error = "socket \"" + c->socket + "\" must be an absolute path";
    return false;
  }
  c->connect_timeout = std::min(c->connect_timeout, c->timeout);
  return true;
}

}  // namespace nodevol::flex
