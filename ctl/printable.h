// Text from nodevold (volume names, parameters, targets, error messages)
// made safe for an operator's terminal. Parameters come from pod authors
// (claim annotations, inline options): written raw, an escape sequence in
// one could retitle the window, hide lines or fake output.
#pragma once

#include <string>
#include <string_view>

namespace nodevol::ctl {

// `s` with every C0 control (tab and newline too: a cell or a line must
// stay one), DEL, C1 control (U+0080..U+009F, e.g. the one-byte CSI U+009B)
// and byte of invalid UTF-8 written as \xNN, and "\" as "\\"; valid
// printable UTF-8 passes unchanged.
std::string Printable(std::string_view s);

}  // namespace nodevol::ctl
