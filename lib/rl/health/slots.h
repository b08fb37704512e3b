// Slots: the resources rl-watchdog run hands to the processes it starts (man/rl-watchdog.1,
// "SLOTS"). A slot is a set of CPUs, a set of GPUs, a CPU quota, or a mix, written as in the
// pipeline file:
//
//   "cpus=0-3"            CPUs 0..3 (the list syntax of taskset -c and cpuset(7): 0,2,4-7)
//   "gpus=1"              CUDA device 1 (CUDA_VISIBLE_DEVICES)
//   "cpus=8-15 gpus=0"    both
//   "cpus=1 quota=0.25"   CPU 1, and at most a quarter of a CPU's time (cpu_quota.h)
//
// A process started in slots runs with its CPU affinity set to the union of their CPUs before it
// executes anything (so every thread it makes inherits it), CUDA_VISIBLE_DEVICES set to their
// GPUs, and RL_SLOT_IDS, RL_SLOT_CPUS and RL_SLOT_THREADS in its environment, so a command can say
// `--threads $RL_SLOT_THREADS`. Slots may name the same CPU twice: they then share it, which is
// how a pipeline tries more splits than the machine has cores; with quotas, sharing a CPU does not
// make its time one pool (a slot's unused share is not another slot's).
// Thread safety: values and reentrant functions.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "rl/core/status.h"

namespace rl::health {

struct Slot {
  std::string text;         // as written
  std::vector<int> cpus;    // ascending, no repeats; empty: any CPU
  std::vector<int> gpus;    // ascending, no repeats; empty: none given
  double quota = 0;         // CPUs of time, 0.01 to 4096; 0: no quota
};

// Parses "cpus=LIST gpus=LIST quota=F" (any of them, in any order). InvalidArgument, naming the
// text, for anything else, for a CPU this process may not run on, for lists over 4096 entries,
// or for a quota outside 0.01..4096 or above the CPUs the slot names.
Result<Slot> ParseSlot(const std::string& text);
// Parses a CPU or GPU list: "0", "0,2", "4-7", "0-1,6". InvalidArgument on anything else.
Result<std::vector<int>> ParseIdList(const std::string& text);
// "0-3,6": the shortest list form of ascending ids.
std::string IdListText(const std::vector<int>& ids);

// What a process in `slots` (indices into `all`) gets: the union of their CPUs and GPUs.
struct SlotGrant {
  std::vector<int> slots;   // the indices, ascending
  std::vector<int> cpus, gpus;
  double quota = 0;  // the sum of the slots' quotas when each has one, else 0 (none)
};
SlotGrant Grant(const std::vector<Slot>& all, const std::vector<int>& slots);
// The environment of a grant: RL_SLOT_IDS ("2,3"), RL_SLOT_CPUS ("0-1", empty: any),
// RL_SLOT_THREADS (its CPU count, or this machine's when it names none; with a quota, the quota
// rounded up, at most that), RL_SLOT_QUOTA when it has a quota, and, when it has GPUs,
// CUDA_VISIBLE_DEVICES.
std::map<std::string, std::string> GrantEnv(const SlotGrant& g);

// Sets the CPU affinity of every thread of `pid` (a process that runs already: an activated
// spare). New threads inherit it from the thread that makes them. IOError when the kernel refuses.
Status PinProcess(pid_t pid, const std::vector<int>& cpus);
// The CPUs of the calling thread's affinity mask (what taskset -p shows for it).
std::vector<int> AllowedCpus(pid_t pid = 0);

}  // namespace rl::health
