#include "rl/reward/colocation_cmd.h"

#include <iostream>
#include <memory>

#include "rl/core/fail.h"
#include "rl/reward/colocation.h"
#include "rl/reward/judge_flags.h"

namespace rl::reward {

profile::Subcommand AddColocationProfile(CommandLine& cl) {
  auto o = std::make_shared<ColocationOptions>();
  CLI::App* app = cl.Sub("colocation",
                         "rollout time per step with a judge beside the sampler on its own core (partial colocation) "
                         "against generate-then-judge on both cores (full), with dynamic sampling, in one run");
  cl.Require(cl.Bind(app, "--model", &o->model));
  cl.Bind(app, "--weights", &o->weights);
  cl.Require(cl.Bind(app, "--prompts", &o->prompts));
  BindJudgeFlags(cl, app, &o->judge);
  cl.Bind(app, "--group-size", &o->group_size)->check(CLI::Range(2, 4096));
  cl.Bind(app, "--prompts-per-step", &o->prompts_per_step)
      ->check(CLI::Range(1, 100000))
      ->description("accepted groups (prompts) a step needs [env RL_TRAIN_PROMPTS_PER_STEP]");
  cl.Bind(app, "--micro-groups", &o->micro_groups)->check(CLI::Range(1, 100000));
  cl.Bind(app, "--steps", &o->steps)->check(CLI::Range(1, 100000))->description("measured steps of each placement");
  cl.Bind(app, "--max-new-tokens", &o->max_new_tokens)->check(CLI::Range(1, 4096));
  cl.Bind(app, "--temperature", &o->temperature)->check(Temperature(false));
  cl.Bind(app, "--seed", &o->seed);
  cl.Bind(app, "--reject-by", &o->reject_by)->check(CLI::IsMember({"addition", "exact", "numeric", "math"}));
  cl.Bind(app, "--cores", &o->cores)->delimiter(',')->expected(0, 2);
  cl.BindFlag(app, "--json", &o->json);
  return {app, [o] {
            if (o->judge.dir.empty()) {
              return Fail("rl-profile", Status::InvalidArgument("colocation needs --judge DIR"));
            }
            auto r = RunColocation(*o, std::cout);
            return r.ok() ? kExitOk : Fail("rl-profile", r.status());
          }};
}

}  // namespace rl::reward
