// Logging setup: spdlog to the systemd journal when run by systemd (or when
// asked), to stderr otherwise.
#pragma once

#include <string>

namespace nodevol {

// target: auto | journal | stderr; level: trace..error (validated by config).
void SetupLogging(const std::string& target, const std::string& level);

}  // namespace nodevol
