// Log: the driver's diagnostics, to syslog (the journal on systemd hosts).
//
// Never stdout or stderr: kubelet parses both as the call's one JSON answer.
// syslog(3) needs no library beyond libc, so the driver keeps working when a
// containerized kubelet runs it. Callers never pass secret values.
#pragma once

#include <string>

namespace nodevol::flex {

// Opens the log (ident "nodevol-flex").
void OpenLog();
void LogInfo(const std::string& message);
void LogError(const std::string& message);

}  // namespace nodevol::flex
