// The --judge-* flags of rl-reward run and score, and of rl-profile colocation, bound in one
// place so that every tool that loads a judge reads them the same way (judge.h says what they do).
// Thread safety: plain functions.
#pragma once

#include "rl/core/options.h"
#include "rl/reward/judge.h"

namespace rl::reward {

// Binds --judge, --judge-mode, --judge-template, --judge-verdict, --judge-threshold,
// --judge-pattern and --judge-max-new-tokens on `sub`. *o must outlive parsing.
void BindJudgeFlags(CommandLine& cl, CLI::App* sub, JudgeOptions* o);

}  // namespace rl::reward
