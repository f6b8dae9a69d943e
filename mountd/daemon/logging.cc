#include "daemon/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/sinks/systemd_sink.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

namespace nodevol {

void SetupLogging(const std::string& target, const std::string& level) {
  // systemd sets JOURNAL_STREAM when stderr is connected to the journal.
  bool journal = target == "journal" || (target == "auto" && std::getenv("JOURNAL_STREAM") != nullptr);
  std::shared_ptr<spdlog::logger> logger;
  if (journal) {
    logger = std::make_shared<spdlog::logger>("nodevold", std::make_shared<spdlog::sinks::systemd_sink_mt>());
    logger->set_pattern("%v");  // the journal adds time, unit and priority
  } else {
    logger = std::make_shared<spdlog::logger>("nodevold", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  }
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace nodevol
