// rl-env's command line: `serve` (the tool sandbox role), `call` (one request from the shell,
// results as JSON lines) and `calc` (the shipped calculator tool, speaking the tool protocol on
// stdin/stdout). EnvMain returns the exit code (sysexits). See man/rl-env.1.
#pragma once

namespace rl::env {

int EnvMain(int argc, char** argv);

}  // namespace rl::env
