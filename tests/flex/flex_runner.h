// RunFlex: runs a FlexVolume driver the way kubelet does (fork + execve, argv
// as in the contract with the JSON as one element, stdin /dev/null, stdout
// and stderr into one pipe read to EOF), so tests read like the contract.
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nodevol::testing {

struct FlexResult {
  int exit_code = -1;       // exit status, 128+signal, -1 when not run
  std::string output;       // combined stdout+stderr (kCombined) or stdout alone (kSeparate)
  std::string err;          // stderr alone (kSeparate only)
  nlohmann::json json;      // the whole output parsed; null when it is not exactly one JSON object
  std::string parse_error;  // why json is null
  std::chrono::milliseconds elapsed{0};  // fork to pipe EOF
  bool pipe_held = false;   // the pipe stayed open > 2 s after the driver exited (a leaked descriptor)
  bool timed_out = false;   // killed after the runner's own limit

  // json's "status" / "message" when they are strings, else "".
  std::string status() const;
  std::string message() const;
};

enum class Capture { kCombined, kSeparate };

// exe + args run with the test's environment minus NODEVOL_FLEX_*, plus env.
// dev_log: when set, the driver runs in a private mount namespace whose
// /dev is a fresh tmpfs (null, zero, random, urandom) with /dev/log bound to
// that socket path, so a test can read what the driver sends to syslog.
FlexResult RunExe(const std::string& exe, const std::vector<std::string>& args,
                  const std::map<std::string, std::string>& env = {}, Capture capture = Capture::kCombined,
                  std::chrono::seconds limit = std::chrono::seconds(60), const std::string& dev_log = "");

// The built driver (NODEVOL_FLEX_PATH).
inline FlexResult RunFlex(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
                          Capture capture = Capture::kCombined) {
  return RunExe(NODEVOL_FLEX_PATH, args, env, capture);
}

// A string map as kubelet marshals it: Go's encoding/json, sorted keys,
// '<' '>' '&' escaped as \u003c \u003e \u0026.
std::string KubeletJson(const std::map<std::string, std::string>& options);

// Human-readable summary of a result for assertion messages.
std::string Describe(const FlexResult& r);

}  // namespace nodevol::testing
