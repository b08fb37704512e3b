#include "rl/health/spare_pool.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include "rl/core/fs.h"
#include "rl/core/log.h"
#include "rl/health/cpu_quota.h"
#include "rl/health/process.h"
#include "rl/health/spare.h"

namespace rl::health {

Result<std::vector<pid_t>> SparePool::Fill(const PipelineSpec& p, const RoleSpec* spec, const std::string& heartbeat,
                                           const std::string& run_dir) {
  std::vector<pid_t> started;
  RL_RETURN_IF_ERROR(MakeDirs(run_dir + "/logs"));
  while (Count(spec) < spec->spares) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return Status::IOError(ErrnoMessage("pipe2", "spare of " + spec->name));
    std::map<std::string, std::string> env = PipelineEnv(p, heartbeat, run_dir);
    env[kSpareFdEnv] = std::to_string(fds[0]);
    // The spare's pid is known only once it runs: its log is named after the spawn.
    std::string log = run_dir + "/logs/" + spec->kind + "-spare.log";
    Result<pid_t> pid = SpawnRole(spec->command, env, log, fds[0]);
    ::close(fds[0]);
    if (!pid.ok()) {
      ::close(fds[1]);
      return pid.status();
    }
    std::string named = run_dir + "/logs/" + spec->kind + "-spare-" + std::to_string(*pid) + ".log";
    std::rename(log.c_str(), named.c_str());  // the child holds the file open: it writes on under the new name
    spares_.push_back({spec, *pid, fds[1]});
    started.push_back(*pid);
  }
  return started;
}

std::vector<const RoleSpec*> SparePool::Reap() {
  std::vector<const RoleSpec*> gone;
  for (auto it = spares_.begin(); it != spares_.end();) {
    if (ReapChild(it->pid) || ProcessGone(it->pid)) {
      ReapChild(it->pid);  // gone but not reaped when its last thread ended after the first try
      ::close(it->fd);
      gone.push_back(it->spec);
      it = spares_.erase(it);
    } else {
      ++it;
    }
  }
  return gone;
}

Result<bool> SparePool::Activate(const PipelineSpec& p, const std::string& run_dir, Instance* inst) {
  Reap();
  auto it = std::find_if(spares_.begin(), spares_.end(), [&](const Spare& s) { return s.spec == inst->spec; });
  if (it == spares_.end()) return false;
  Spare spare = *it;
  spares_.erase(it);
  std::map<std::string, std::string> env = {{"RL_ID", inst->id}};
  SlotGrant grant;
  if (!inst->slots.empty()) {
    grant = InstanceGrant(p, *inst);
    env.merge(GrantEnv(grant));
    // Before the activation goes out: its work must not start on other CPUs.
    if (Status s = PinProcess(spare.pid, grant.cpus); !s.ok()) spdlog::warn("spare of {}: {}", inst->key, s.ToString());
    if (grant.quota > 0) {
      if (Status s = JoinQuotaGroup(run_dir, grant.slots, grant.quota, spare.pid); !s.ok()) {
        spdlog::warn("spare of {}: {}", inst->key, s.ToString());
      }
    }
  }
  std::string message = EncodeActivation(env);
  ssize_t n = ::write(spare.fd, message.data(), message.size());  // a pipe takes 64 KiB without blocking
  ::close(spare.fd);
  if (n != static_cast<ssize_t>(message.size())) {
    StopProcess(spare.pid, 0);
    return false;  // it died meanwhile: the caller starts a new process instead
  }
  RL_RETURN_IF_ERROR(TakeProcess(run_dir, spare.pid, inst));
  return true;
}

void SparePool::StopAll() {
  for (const Spare& s : spares_) ::close(s.fd);  // a spare exits on its own when its pipe closes
  std::vector<StopOrder> orders;
  for (const Spare& s : spares_) orders.push_back({s.pid, 2000});
  StopProcesses(orders);  // all at once: each costs at most its own 2 s, not one after the other
  spares_.clear();
}

int SparePool::Count(const RoleSpec* spec) const {
  return static_cast<int>(std::count_if(spares_.begin(), spares_.end(), [&](const Spare& s) { return s.spec == spec; }));
}

}  // namespace rl::health
