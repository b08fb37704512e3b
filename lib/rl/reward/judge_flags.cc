#include "rl/reward/judge_flags.h"

namespace rl::reward {

void BindJudgeFlags(CommandLine& cl, CLI::App* sub, JudgeOptions* o) {
  cl.Bind(sub, "--judge", &o->dir);
  cl.Bind(sub, "--judge-mode", &o->mode)->check(CLI::IsMember({"prob", "generate"}));
  cl.Bind(sub, "--judge-template", &o->prompt_template);
  cl.Bind(sub, "--judge-verdict", &o->verdict);
  cl.Bind(sub, "--judge-threshold", &o->threshold)->check(CLI::Range(0.0, 1.0));
  cl.Bind(sub, "--judge-pattern", &o->pattern);
  cl.Bind(sub, "--judge-max-new-tokens", &o->max_new_tokens)->check(CLI::Range(int64_t{1}, int64_t{4096}));
  cl.Bind(sub, "--device", &o->device);
}

}  // namespace rl::reward
