// Strict number parsing for options and parameters: the whole string must
// be a number in range, or INVALID_ARGUMENT naming `what`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace nodevol {

Status ParseUint(std::string_view what, std::string_view text, uint64_t max, uint64_t* out, int base = 10);

// "a,b,c" as {"a", "b", "c"}: a flag's list of names. INVALID_ARGUMENT
// naming `what` for an empty item or one with a space in it.
Status ParseNameList(std::string_view what, std::string_view text, std::vector<std::string>* out);

}  // namespace nodevol
