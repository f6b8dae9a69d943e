// nodevol-flex's config file (/etc/nodevol/flex.conf, flex/config.h): a
// refusal says why; an accepted one has usable timeouts.
#include <cstdlib>

#include "flex/config.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nodevol::fuzz::MemFile file(data, size);
  ::setenv("NODEVOL_FLEX_CONFIG", file.path().c_str(), 1);
  ::unsetenv("NODEVOL_FLEX_SOCKET");
  ::unsetenv("NODEVOL_FLEX_TIMEOUT");
  nodevol::flex::Config c;
  std::string error;
  bool ok = nodevol::flex::LoadConfig(&c, &error);
  FUZZ_CHECK(ok || !error.empty(), "a refused config without a reason");
  if (ok) {
    FUZZ_CHECK(c.timeout.count() > 0 && c.connect_timeout.count() > 0, "an accepted config with a zero timeout");
    FUZZ_CHECK(!c.socket.empty(), "an accepted config without a socket");
  }
  std::chrono::milliseconds d{0};
  if (nodevol::flex::ParseDuration(std::string(reinterpret_cast<const char*>(data), size), &d))
    FUZZ_CHECK(d.count() > 0, "ParseDuration accepted a zero or negative duration");
  return 0;
}
