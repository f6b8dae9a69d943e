// UTF-8 as RFC 3629 has it: shortest forms only, no surrogates, nothing
// above U+10FFFF. Protobuf's string fields must hold such text (a message
// carrying anything else fails to parse on the other side), and
// nodevolctl shows anything else escaped (ctl/printable.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace nodevol {

// The length of the well-formed UTF-8 sequence at s[i], its code point in
// *cp; 0 when the bytes there are not one.
size_t Utf8Sequence(std::string_view s, size_t i, uint32_t* cp);

// Whether all of `s` is well-formed UTF-8.
bool IsValidUtf8(std::string_view s);

}  // namespace nodevol
