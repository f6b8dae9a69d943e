// Run: executes a program from an argv (never through a shell) with a
// deadline, and collects its exit status and output.
//
// nodevold runs the lvm tools, mkfs, resize2fs, mount.nfs and the like with
// it. The child gets a minimal environment (PATH, LC_ALL=C plus what the
// caller adds), only fds 0-2 (stdin /dev/null or the given input), default
// signal dispositions and an empty mask, and its own process group. At the
// deadline the whole group is killed; a child that cannot die (stuck in the
// kernel on a dead NFS server) is left to a reaper thread so that the
// caller returns on time anyway.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/status.h"

namespace nodevol {

struct RunOptions {
  std::chrono::milliseconds timeout{60000};
  // Extra environment entries, "NAME=VALUE".
  std::vector<std::string> env;
  // Written to the child's stdin (else /dev/null).
  std::string input;
  // Output beyond this many bytes per stream is dropped (and said so).
  size_t max_output = 4 << 20;
};

struct RunResult {
  int exit_code = -1;   // -1 when killed by a signal
  int term_signal = 0;  // the signal that ended it, or 0
  bool timed_out = false;
  std::string out, err;
  std::chrono::milliseconds elapsed{0};

  bool success() const { return exit_code == 0 && !timed_out; }
  // "exit 5: <last stderr line>" / "killed by signal 9" / "timed out after 5s"
  std::string Describe() const;
};

// Runs argv[0] (an absolute path) with argv. Returns a non-OK Status only
// when the program could not be started; a failing or timed-out program is
// OK with the facts in *result.
Status Run(const std::vector<std::string>& argv, const RunOptions& options, RunResult* result);

// Run, with a non-zero exit, a signal or the deadline turned into an error
// whose message names the program and quotes its stderr: INTERNAL, or
// DEADLINE_EXCEEDED for a timeout.
Status RunChecked(const std::vector<std::string>& argv, const RunOptions& options, RunResult* result);

}  // namespace nodevol
