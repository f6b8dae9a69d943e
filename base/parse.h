// Strict number parsing for options and parameters: the whole string must
// be a number in range, or INVALID_ARGUMENT naming `what`.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace nodevol {

Status ParseUint(std::string_view what, std::string_view text, uint64_t max, uint64_t* out, int base = 10);

}  // namespace nodevol
