// Role processes of rl-watchdog run: started in a session of their own, so a signal to the
// watchdog or its terminal never reaches them and a watchdog killed with -9 leaves them running;
// recognised again after a watchdog restart by pid and start time (pid reuse cannot fool it).
// Thread safety: reentrant; call from the thread that reaps children.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rl/core/status.h"

namespace rl::health {

// Starts `command` as `/bin/sh -c "exec COMMAND"` (without the exec when COMMAND is a list or a
// pipeline: `a; b`, `a && b`, `a | b`) in a new session (setsid), stdin from
// /dev/null, stdout and stderr appended to log_path, with `env` added to the environment.
// `inherit_fd` (when >= 0) stays open in the child under the same number; every other
// descriptor of ours should be close-on-exec. `cpus` (when not empty) is the child's CPU affinity,
// set before it executes anything, so every thread and process it makes inherits it. `join_fd`
// (when >= 0, close-on-exec) is a cgroup.procs the child writes "0" to before it executes
// anything, joining that group (cpu_quota.h); the caller still owns and closes it.
Result<pid_t> SpawnRole(const std::string& command, const std::map<std::string, std::string>& env,
                        const std::string& log_path, int inherit_fd = -1, const std::vector<int>& cpus = {},
                        int join_fd = -1);

// The fields of /proc/PID/stat after the command name (which may hold spaces and parentheses):
// [0] is field 3 (state), [11] and [12] are fields 14 and 15 (user and system time, in clock
// ticks). Empty when there is no such process.
std::vector<std::string> StatFields(pid_t pid);

// The kernel's start time of `pid` (clock ticks since boot, /proc/PID/stat field 22), or -1 when
// there is no such process. With the pid it names one process for good.
int64_t ProcessStartTicks(pid_t pid);
// The session of `pid` (/proc/PID/stat field 6), or -1. A role started by SpawnRole leads its own
// session, so every process of that role has the role's first pid as its session.
int64_t ProcessSession(pid_t pid);
// True when `pid` no longer runs: no such process, or a zombie waiting to be reaped whose other
// threads are gone too (so it holds no files, locks or ports any more).
bool ProcessGone(pid_t pid);
// Reaps `pid` if it is an exited child of ours: its wait status; nullopt while it runs or when it
// is not our child.
std::optional<int> ReapChild(pid_t pid);
// "exited with status 1", "killed by signal 9 (KILL)".
std::string DescribeWaitStatus(int status);
// SIGTERM to the process group of `pid`, SIGKILL after grace_ms (at once when grace_ms is 0);
// returns once the process is gone (reaped if it is our child). A stopped (SIGSTOP) process is
// continued first so it can handle SIGTERM.
void StopProcess(pid_t pid, int64_t grace_ms);

// One process to stop and the time it gets to stop cleanly (0: SIGKILL at once).
struct StopOrder {
  pid_t pid = 0;
  int64_t grace_ms = 0;
};
// StopProcess for several processes at once: each is signalled at once and gets its own grace,
// all running at the same time, so stopping N roles takes the longest grace, not the sum.
// Returns once every one is gone.
void StopProcesses(const std::vector<StopOrder>& orders);

}  // namespace rl::health
