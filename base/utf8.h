// Whether text is well-formed UTF-8 (RFC 3629): no overlong forms, no
// surrogates, nothing above U+10FFFF. Protobuf's string fields must hold
// such text: a message carrying anything else fails to parse on the other
// side, so callers check what they forward.
#pragma once

#include <string_view>

namespace nodevol {

bool IsValidUtf8(std::string_view s);

}  // namespace nodevol
