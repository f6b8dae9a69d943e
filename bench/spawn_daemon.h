// SpawnDaemon: how the benchmarks start a nodevold (or a tracer wrapping
// it): argv as given, stdin and stdout on /dev/null, stderr appended to
// `log`, its own process group (a ^C at the terminal reaches the bench,
// which then stops the daemon itself after in-flight work), an empty signal
// mask and default SIGINT/SIGTERM. Returns 0 or posix_spawn's error.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

int SpawnDaemon(const std::vector<std::string>& argv, const std::string& log, pid_t* pid);
