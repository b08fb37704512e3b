#include "rl/core/log.h"

#include <spdlog/sinks/stdout_sinks.h>

namespace rl {

Status InitLogging(const std::string& tool, const std::string& level) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    return Status::InvalidArgument("unknown log level '" + level + "'");
  }
  spdlog::drop(tool);
  auto logger = spdlog::stderr_logger_mt(tool);
  logger->set_pattern(tool + ": %v");
  logger->set_level(lvl);
  spdlog::set_default_logger(logger);
  return Status::OK();
}

}  // namespace rl
