#include "rl/core/options.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "rl/core/fs.h"
#include "rl/core/status.h"

namespace rl {
namespace {

// The whole text as a number, or nullopt.
std::optional<double> NumberOf(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (end == begin) return std::nullopt;
  while (*end == ' ') ++end;
  if (*end != '\0') return std::nullopt;
  return v;
}

CLI::Validator NumberCheck(const std::string& what, bool (*ok)(double)) {
  return CLI::Validator(
      [what, ok](std::string& text) -> std::string {
        const std::optional<double> v = NumberOf(text);
        if (!v) return "'" + text + "' is not a number";
        return ok(*v) ? std::string() : text + " is not " + what;
      },
      "", what);
}

// One endpoint to connect to, or why not.
std::string EndpointProblem(const std::string& e) {
  const auto starts = [&](const char* scheme) { return e.rfind(scheme, 0) == 0; };
  if (starts("ipc://") || starts("inproc://")) return e.size() > e.find("://") + 3 ? "" : "'" + e + "' names nothing";
  if (!starts("tcp://")) return "'" + e + "' is not an endpoint (tcp://HOST:PORT, ipc://PATH or inproc://NAME)";
  const std::string rest = e.substr(6);
  const size_t colon = rest.rfind(':');
  const std::string port = colon == std::string::npos ? "" : rest.substr(colon + 1);
  const bool digits = !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
  if (colon == 0 || !digits || std::stoi(port) < 1 || std::stoi(port) > 65535) {
    return "'" + e + "' is not tcp://HOST:PORT with a port in [1, 65535]";
  }
  return "";
}

}  // namespace

const CLI::Validator kNonNegative = NumberCheck("a number >= 0", [](double v) { return v >= 0; });
const CLI::Validator kPositive = NumberCheck("a number > 0", [](double v) { return v > 0; });
const CLI::Validator kLeaseSeconds =
    NumberCheck("0.001 to 31536000 (a year)", [](double v) { return v >= 0.001 && v <= 31536000; });
const CLI::Validator kFinite = NumberCheck("a finite number", [](double v) { return std::isfinite(v); });
const CLI::Validator kNotNegativeText(
    [](std::string& text) -> std::string {
      const size_t at = text.find_first_not_of(' ');
      return at != std::string::npos && text[at] == '-' ? text + " is negative; this option takes 0 or more" : "";
    },
    "", "not negative");

CLI::Validator Temperature(bool greedy) {
  if (greedy) {
    return NumberCheck("0 (greedy) or at least 0.001",
                       [](double v) { return v == 0 || (v >= kMinTemperature && std::isfinite(v)); });
  }
  return NumberCheck("at least 0.001", [](double v) { return v >= kMinTemperature && std::isfinite(v); });
}

const CLI::Validator kEndpoints(
    [](std::string& text) -> std::string {
      size_t start = 0;
      while (start <= text.size()) {
        size_t comma = text.find(',', start);
        if (comma == std::string::npos) comma = text.size();
        std::string one = text.substr(start, comma - start);
        one.erase(0, one.find_first_not_of(' '));
        one.erase(one.find_last_not_of(' ') + 1);
        if (!one.empty()) {
          if (std::string why = EndpointProblem(one); !why.empty()) return why;
        }
        start = comma + 1;
      }
      return "";
    },
    "", "endpoints");

bool IsConnectFlag(const std::string& flag) {
  for (const char* f : {"--connect", "--units", "--weights-from", "--endpoint", "--tools", "--heartbeat"}) {
    if (flag == f) return true;
  }
  return false;
}

const OptionSpec* FindOption(const std::string& flag, const std::string& who) {
  const std::string tool = who.substr(0, who.find(' '));
  for (const auto& spec : OptionTable()) {
    if (spec.flag != flag) continue;
    if (who.empty()) return &spec;
    for (const auto& t : spec.tools) {
      if (t == who || t == tool) return &spec;
    }
  }
  return nullptr;
}

CommandLine::CommandLine(std::string tool, std::string description)
    : tool_(std::move(tool)), app_(std::move(description), tool_) {
  app_.set_version_flag("--version", std::string(tool_) + " " + RL_VERSION);
  app_.require_subcommand(1);
  app_.fallthrough();  // root options (--log-level) may also follow the subcommand
}

CLI::App* CommandLine::Sub(const std::string& name, const std::string& description) {
  CLI::App* sub = app_.add_subcommand(name, description);
  config_paths_.emplace_back(sub, std::make_unique<std::string>());
  sub->add_option("--config", *config_paths_.back().second,
                  "TOML file of options, keys named as the long flags without dashes "
                  "(command line > RL_* environment > file)");
  return sub;
}

const OptionSpec& CommandLine::Spec(CLI::App* sub, const std::string& flag) const {
  std::string who = sub ? tool_ + " " + sub->get_name() : tool_;
  const OptionSpec* spec = FindOption(flag, who);
  if (spec == nullptr) {
    std::fprintf(stderr, "%s: option %s is not declared for '%s' in option_table.cc\n", tool_.c_str(),
                 flag.c_str(), who.c_str());
    std::abort();
  }
  return *spec;
}

std::string CommandLine::HelpOf(const OptionSpec& spec) {
  return spec.env.empty() ? spec.help : spec.help + " [env " + spec.env + "]";
}

void CommandLine::Remember(CLI::App* app, CLI::Option* opt, const OptionSpec& spec, const std::string& flag,
                           bool is_flag) {
  if (!spec.env.empty()) bound_.push_back({app, opt, spec.env, flag, is_flag});
}

CLI::Option* CommandLine::BindFlag(CLI::App* sub, const std::string& flag, bool* target) {
  const OptionSpec& spec = Spec(sub, flag);
  CLI::Option* opt = Target(sub)->add_flag(flag, *target, HelpOf(spec));
  Remember(Target(sub), opt, spec, flag, true);
  return opt;
}

// CLI11 applies a config file before the environment, so the environment is applied here, after
// parsing, to every option the command line did not name: that gives command line > env > file.
std::optional<int> CommandLine::ApplyEnvironment(const std::vector<std::string>& args) {
  for (const Bound& b : bound_) {
    if (b.app != &app_ && !b.app->parsed()) continue;  // another subcommand's variable
    const char* value = std::getenv(b.env.c_str());
    if (value == nullptr || *value == '\0') continue;
    bool on_command_line = false;
    for (const auto& a : args) {
      on_command_line = on_command_line || a == b.flag || a.rfind(b.flag + "=", 0) == 0;
    }
    if (on_command_line) continue;
    b.opt->clear();
    std::string v = value;
    if (b.is_flag) v = (v == "0" || v == "false" || v == "no") ? "false" : "true";
    try {
      b.opt->add_result(v);
      b.opt->run_callback();
    } catch (const CLI::Error& e) {
      std::fprintf(stderr, "%s: %s=%s: %s\n", tool_.c_str(), b.env.c_str(), value, e.what());
      return kExitUsage;
    }
  }
  return std::nullopt;
}

std::optional<int> CommandLine::CheckRequired() {
  for (CLI::Option* opt : required_) {
    const CLI::App* owner = nullptr;
    for (CLI::App* sub : app_.get_subcommands([](CLI::App*) { return true; })) {
      for (const CLI::Option* o : sub->get_options()) owner = o == opt ? sub : owner;
    }
    if (owner != nullptr && !owner->parsed()) continue;
    if (opt->count() == 0) {
      std::fprintf(stderr, "%s: %s is required (see %s --help)\n", tool_.c_str(), opt->get_name().c_str(),
                   tool_.c_str());
      return kExitUsage;
    }
  }
  return std::nullopt;
}

// CLI11 2.1 reads config files for the root app only, so subcommand files are read here; a
// value from the file fills an option only when the command line did not set it.
std::optional<int> CommandLine::ApplyConfigFile() {
  for (auto& [sub, path] : config_paths_) {
    if (!sub->parsed() || path->empty()) continue;
    std::vector<CLI::ConfigItem> items;
    // CLI11 reads a directory as an empty file and skips binary lines it cannot parse: either
    // would run the tool without the options its user meant to give.
    std::error_code ec;
    if (!std::filesystem::is_regular_file(*path, ec)) {
      std::fprintf(stderr, "%s: config %s: not a file\n", tool_.c_str(), path->c_str());
      return kExitConfig;
    }
    auto text = ReadFile(*path);
    if (!text.ok() || text->find('\0') != std::string::npos) {
      std::fprintf(stderr, "%s: config %s: %s\n", tool_.c_str(), path->c_str(),
                   text.ok() ? "not a text file (it holds NUL bytes)" : text.status().message().c_str());
      return kExitConfig;
    }
    try {
      std::istringstream in(*text);
      items = CLI::ConfigTOML().from_config(in);
    } catch (const CLI::Error& e) {
      std::fprintf(stderr, "%s: config %s: %s\n", tool_.c_str(), path->c_str(), e.what());
      return kExitConfig;
    }
    for (const auto& item : items) {
      if (item.name == "++" || item.name == "--") continue;
      if (!item.parents.empty() && !(item.parents.size() == 1 && item.parents[0] == sub->get_name())) continue;
      CLI::Option* opt = sub->get_option_no_throw("--" + item.name);
      if (opt == nullptr) {
        std::fprintf(stderr, "%s: config %s: unknown option '%s' for %s\n", tool_.c_str(), path->c_str(),
                     item.name.c_str(), sub->get_name().c_str());
        return kExitConfig;
      }
      if (opt->count() > 0) continue;
      try {
        for (const auto& v : item.inputs) opt->add_result(v);
        opt->run_callback();
      } catch (const CLI::Error& e) {
        std::fprintf(stderr, "%s: config %s: %s: %s\n", tool_.c_str(), path->c_str(), item.name.c_str(), e.what());
        return kExitConfig;
      }
    }
  }
  return std::nullopt;
}

std::optional<int> CommandLine::Parse(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    app_.parse(argc, argv);
    if (auto code = ApplyConfigFile()) return code;
    if (auto code = ApplyEnvironment(args)) return code;
    if (auto code = CheckRequired()) return code;
  } catch (const CLI::CallForHelp& e) {
    std::cout << app_.help();
    return 0;
  } catch (const CLI::CallForAllHelp& e) {
    std::cout << app_.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    // CLI11 prints subcommand help itself on CallForHelp within a subcommand; use its exit path.
    if (e.get_exit_code() == 0) return app_.exit(e);
    std::fprintf(stderr, "%s: %s (see %s --help)\n", tool_.c_str(), e.what(), tool_.c_str());
    return kExitUsage;
  }
  return std::nullopt;
}

}  // namespace rl
