// Config: where nodevol-flex finds nodevold and how long it waits for it.
//
// Read from /etc/nodevol/flex.conf when it exists (lines `key = value`,
// `#` comments), then overridden by the environment, which is how tests
// point the driver at a sandboxed daemon:
//   NODEVOL_FLEX_CONFIG   another config file
//   NODEVOL_FLEX_SOCKET   socket
//   NODEVOL_FLEX_TIMEOUT  timeout
// Durations are "30s", "500ms" or plain seconds.
#pragma once

#include <chrono>
#include <string>

namespace nodevol::flex {

inline constexpr const char* kDefaultConfigFile = "/etc/nodevol/flex.conf";

struct Config {
  std::string socket = "/run/nodevol/nodevold.sock";
  // Whole call, connecting included. Well under the ~2 minutes kubelet's
  // pod sync waits, so a stuck daemon shows as a FailedMount event.
  std::chrono::milliseconds timeout{30000};
  // How long to wait for the socket to accept (bounded by timeout): long
  // enough to ride over `systemctl restart nodevold`.
  std::chrono::milliseconds connect_timeout{5000};
};

// Loads the configuration; false with a message naming the file and key
// when it is unusable (a missing default file is not an error).
bool LoadConfig(Config* out, std::string* error);

// Parses "30s", "500ms", "2" (seconds); false when malformed or zero.
bool ParseDuration(const std::string& text, std::chrono::milliseconds* out);

}  // namespace nodevol::flex
