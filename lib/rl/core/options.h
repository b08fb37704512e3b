// The option registry: every command-line option of every tool is declared once, in
// option_table.cc (flag, environment variable, help, which tools take it). Tools bind options by
// flag through CommandLine, which fills the help text (with the env var) from the table, so the
// same flag means the same thing everywhere, except that one flag may have separate entries for
// separate tools when their variables must differ (rl-env's --bind is RL_ENV_BIND, rl-queue's
// RL_QUEUE_BIND). Precedence: command line > RL_* environment > --config file.toml > default. A
// test checks that no two entries share a variable or a flag for one tool.
// Thread safety: use from the main thread before starting others.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace rl {

// Checks of option values, with one-line messages (CLI11's NonNegativeNumber and PositiveNumber
// name their bound as a 309-digit DBL_MAX, and call text that is no number out of range).
extern const CLI::Validator kNonNegative;  // a number >= 0
extern const CLI::Validator kPositive;     // a number > 0
// A lease in seconds: 0.001 to a year, the queue's bound on lease_ms (rl-protocol(7), LIMITS).
extern const CLI::Validator kLeaseSeconds;
// A sampling temperature: at least kMinTemperature, or 0 (greedy) where `greedy` allows it. Below
// it logits / T overflow float32 (1e-300 made every logprob NaN).
constexpr double kMinTemperature = 1e-3;
CLI::Validator Temperature(bool greedy);
// ZeroMQ endpoints to connect to, comma-separated (empty: none): tcp://HOST:PORT, ipc://PATH or
// inproc://NAME. ZeroMQ throws on any other text, out of the socket's constructor.
extern const CLI::Validator kEndpoints;
// The flags whose values are endpoints that a tool connects to (kEndpoints is added to them).
bool IsConnectFlag(const std::string& flag);
// What every option of a number type gets: a float must be finite (CLI11's ranges let NaN
// through, since no comparison with it fails), an unsigned integer not negative (CLI11 turns
// "-1" into 2^64 - 1).
extern const CLI::Validator kFinite;
extern const CLI::Validator kNotNegativeText;

struct OptionSpec {
  std::string flag;                // "--dir"
  std::string env;                 // "RL_DIR", or empty when the option has no variable
  std::string help;                // one line
  std::vector<std::string> tools;  // "rl-queue serve", "rl-queue get", ...
};

const std::vector<OptionSpec>& OptionTable();

// For the option_table*.cc files: adds `tools` to the entry of `flag`, a flag another table
// already declares with the same meaning. A flag not declared yet is left alone (the options test
// then finds the tool binding an undeclared flag).
void AddTools(std::vector<OptionSpec>* table, const std::string& flag, const std::vector<std::string>& tools);
// The entry of `flag` for `who` ("rl-env serve" or "rl-env"; empty: the first entry of the flag),
// or nullptr when there is none.
const OptionSpec* FindOption(const std::string& flag, const std::string& who = "");

class CommandLine {
 public:
  CommandLine(std::string tool, std::string description);
  CLI::App& app() { return app_; }
  const std::string& tool() const { return tool_; }

  // A subcommand with its own --config option.
  CLI::App* Sub(const std::string& name, const std::string& description);

  // Binds a declared option of `sub` (or the root app when sub is null) to *target.
  // Aborts when the flag is not in the table for "<tool> <sub>": that is a programming error.
  template <typename T>
  CLI::Option* Bind(CLI::App* sub, const std::string& flag, T* target) {
    const OptionSpec& spec = Spec(sub, flag);
    CLI::Option* opt = Target(sub)->add_option(flag, *target, HelpOf(spec));
    opt->capture_default_str();
    if constexpr (std::is_floating_point_v<T>) opt->check(kFinite);
    if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) opt->check(kNotNegativeText);
    if constexpr (std::is_same_v<T, std::string>) {
      if (IsConnectFlag(flag)) opt->check(kEndpoints);
    }
    Remember(Target(sub), opt, spec, flag);
    return opt;
  }
  CLI::Option* BindFlag(CLI::App* sub, const std::string& flag, bool* target);
  // Marks an option as required once the command line, the environment and the config file
  // have all been read (CLI11's own required() looks before the last two).
  void Require(CLI::Option* opt) { required_.push_back(opt); }

  // Parses argv. Returns an exit code when the tool should exit now (--help, --version: 0; a
  // usage error: 64, after one line on stderr), or nullopt to go on.
  std::optional<int> Parse(int argc, char** argv);

 private:
  struct Bound {
    CLI::App* app;
    CLI::Option* opt;
    std::string env;
    std::string flag;
    bool is_flag;
  };
  const OptionSpec& Spec(CLI::App* sub, const std::string& flag) const;
  CLI::App* Target(CLI::App* sub) { return sub ? sub : &app_; }
  static std::string HelpOf(const OptionSpec& spec);
  void Remember(CLI::App* app, CLI::Option* opt, const OptionSpec& spec, const std::string& flag,
                bool is_flag = false);
  std::optional<int> ApplyEnvironment(const std::vector<std::string>& args);
  std::optional<int> CheckRequired();
  // Fills options the command line left unset from the selected subcommand's --config file.
  std::optional<int> ApplyConfigFile();

  std::string tool_;
  CLI::App app_;
  std::vector<Bound> bound_;
  std::vector<CLI::Option*> required_;
  std::vector<std::pair<CLI::App*, std::unique_ptr<std::string>>> config_paths_;
};

}  // namespace rl
