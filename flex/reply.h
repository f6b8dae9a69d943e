// Reply: the one JSON object nodevol-flex prints for every call.
//
// kubelet parses stdout+stderr together as exactly one JSON value and
// compares `status` exactly, so a Reply is the only thing the driver ever
// writes, and the exit code follows from it (0 for Success and
// Not supported, 1 for Failure).
#pragma once

#include <string>

namespace nodevol::flex {

struct Reply {
  enum class Kind { kSuccess, kFailure, kNotSupported };
  Kind kind = Kind::kFailure;
  std::string message;
  // init only: the capabilities object, always complete.
  bool with_capabilities = false;

  static Reply Success(std::string message = {}) { return {Kind::kSuccess, std::move(message)}; }
  static Reply Failure(std::string message) { return {Kind::kFailure, std::move(message)}; }
  static Reply NotSupported(std::string message) { return {Kind::kNotSupported, std::move(message)}; }
  static Reply Init();

  int exit_code() const { return kind == Kind::kFailure ? 1 : 0; }
  // One line: {"status":...,"message":...[,"capabilities":{...}]}\n
  std::string ToJson() const;
};

}  // namespace nodevol::flex
