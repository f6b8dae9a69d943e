#include "log.h"

#include <syslog.h>

namespace nodevol::flex {

void OpenLog() {
  // No LOG_CONS/LOG_PERROR: nothing may reach a terminal or stderr.
  openlog("nodevol-flex", LOG_PID, LOG_DAEMON);
}

void LogInfo(const std::string& message) { syslog(LOG_INFO, "%s", message.c_str()); }
void LogError(const std::string& message) { syslog(LOG_ERR, "%s", message.c_str()); }

}  // namespace nodevol::flex
