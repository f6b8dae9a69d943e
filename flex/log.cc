#include "log.h"

#include <grpc/support/log.h>
#include <syslog.h>

namespace nodevol::flex {
namespace {

void GrpcLog(gpr_log_func_args* args) {
  int priority = args->severity == GPR_LOG_SEVERITY_ERROR ? LOG_ERR : LOG_DEBUG;
  syslog(priority, "grpc: %s (%s:%d)", args->message, args->file, args->line);
}

}  // namespace

void OpenLog() {
  // No LOG_CONS/LOG_PERROR: nothing may reach a terminal or stderr.
  openlog("nodevol-flex", LOG_PID, LOG_DAEMON);
  gpr_set_log_function(GrpcLog);
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);
}

void LogInfo(const std::string& message) { syslog(LOG_INFO, "%s", message.c_str()); }
void LogError(const std::string& message) { syslog(LOG_ERR, "%s", message.c_str()); }

}  // namespace nodevol::flex
