#include "rl/health/slots.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "rl/core/printf.h"

namespace rl::health {
namespace {

constexpr size_t kMaxIds = 4096;

bool ParseId(const std::string& s, int* out) {
  if (s.empty() || s.size() > 6 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  *out = std::stoi(s);
  return true;
}

}  // namespace

Result<std::vector<int>> ParseIdList(const std::string& text) {
  std::set<int> ids;
  std::stringstream in(text);
  std::string part;
  auto bad = [&text](const std::string& why) { return Status::InvalidArgument("'" + text + "': " + why); };
  if (text.empty()) return bad("an empty list");
  while (std::getline(in, part, ',')) {
    size_t dash = part.find('-');
    int lo = 0, hi = 0;
    if (!ParseId(part.substr(0, dash), &lo) || (dash != std::string::npos && !ParseId(part.substr(dash + 1), &hi))) {
      return bad("'" + part + "' is not a number or a range N-M");
    }
    if (dash == std::string::npos) hi = lo;
    if (hi < lo) return bad("the range " + part + " runs backwards");
    if (static_cast<size_t>(hi - lo) + ids.size() >= kMaxIds) return bad("more than 4096 ids");
    for (int i = lo; i <= hi; ++i) ids.insert(i);
  }
  if (text.back() == ',') return bad("a trailing comma");
  return std::vector<int>(ids.begin(), ids.end());
}

std::string IdListText(const std::vector<int>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(ids[i]);
    if (j > i) out += "-" + std::to_string(ids[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> AllowedCpus(pid_t pid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(pid, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

namespace {

// "quota=F": a plain decimal of CPUs, 0.01 to 4096.
Result<double> ParseQuota(const std::string& text, const std::string& value) {
  auto bad = [&] {
    return Status::InvalidArgument("slot '" + text + "': quota '" + value + "' is not a number of CPUs from 0.01 to 4096");
  };
  if (value.empty() || value.size() > 12 ||
      value.find_first_not_of("0123456789.") != std::string::npos || value.front() == '.') {
    return bad();
  }
  char* end = nullptr;
  double q = std::strtod(value.c_str(), &end);
  if (end != value.c_str() + value.size() || !(q >= 0.01 && q <= 4096)) return bad();
  return q;
}

}  // namespace

Result<Slot> ParseSlot(const std::string& text) {
  Slot slot;
  slot.text = text;
  std::stringstream in(text);
  bool any = false, quota = false;
  for (std::string field; in >> field;) {
    size_t eq = field.find('=');
    std::string key = field.substr(0, eq);
    if (eq == std::string::npos || (key != "cpus" && key != "gpus" && key != "quota")) {
      return Status::InvalidArgument("slot '" + text + "': '" + field + "' is not cpus=LIST, gpus=LIST or quota=CPUS");
    }
    if (key == "quota") {
      if (quota) return Status::InvalidArgument("slot '" + text + "': quota given twice");
      RL_ASSIGN_OR_RETURN(slot.quota, ParseQuota(text, field.substr(eq + 1)));
      quota = any = true;
      continue;
    }
    std::vector<int>& ids = key == "cpus" ? slot.cpus : slot.gpus;
    if (!ids.empty()) return Status::InvalidArgument("slot '" + text + "': " + key + " given twice");
    auto list = ParseIdList(field.substr(eq + 1));
    if (!list.ok()) return Status::InvalidArgument("slot '" + text + "': " + key + " " + list.status().message());
    ids = *list;
    any = true;
  }
  if (!any) return Status::InvalidArgument("slot '" + text + "' names no cpus, gpus or quota");
  std::vector<int> allowed = AllowedCpus();
  for (int c : slot.cpus) {
    if (!std::binary_search(allowed.begin(), allowed.end(), c)) {
      return Status::InvalidArgument("slot '" + text + "': CPU " + std::to_string(c) + " is not one this machine lets " +
                                     "us use (" + IdListText(allowed) + ")");
    }
  }
  const size_t cpus = slot.cpus.empty() ? allowed.size() : slot.cpus.size();
  if (slot.quota > static_cast<double>(cpus)) {
    return Status::InvalidArgument("slot '" + text + "': a quota of " + Printf("%g", slot.quota) + " CPUs on " +
                                   std::to_string(cpus) + " CPUs could never be used");
  }
  return slot;
}

SlotGrant Grant(const std::vector<Slot>& all, const std::vector<int>& slots) {
  SlotGrant g;
  g.slots = slots;
  std::sort(g.slots.begin(), g.slots.end());
  std::set<int> cpus, gpus;
  bool every_quota = !g.slots.empty();
  for (int s : g.slots) {
    if (s < 0 || static_cast<size_t>(s) >= all.size()) continue;
    cpus.insert(all[s].cpus.begin(), all[s].cpus.end());
    gpus.insert(all[s].gpus.begin(), all[s].gpus.end());
    every_quota = every_quota && all[s].quota > 0;
    g.quota += all[s].quota;
  }
  // A slot without a quota is as much CPU as its CPUs give: the grant has none either.
  if (!every_quota) g.quota = 0;
  g.cpus.assign(cpus.begin(), cpus.end());
  g.gpus.assign(gpus.begin(), gpus.end());
  return g;
}

std::map<std::string, std::string> GrantEnv(const SlotGrant& g) {
  std::map<std::string, std::string> env;
  env["RL_SLOT_IDS"] = IdListText(g.slots);
  env["RL_SLOT_CPUS"] = IdListText(g.cpus);
  size_t threads = g.cpus.empty() ? AllowedCpus().size() : g.cpus.size();
  if (g.quota > 0) {
    threads = std::min(threads, static_cast<size_t>(std::ceil(g.quota - 1e-9)));
    env["RL_SLOT_QUOTA"] = Printf("%g", g.quota);
  }
  env["RL_SLOT_THREADS"] = std::to_string(std::max<size_t>(1, threads));
  if (!g.gpus.empty()) env["CUDA_VISIBLE_DEVICES"] = IdListText(g.gpus);
  return env;
}

Status PinProcess(pid_t pid, const std::vector<int>& cpus) {
  if (cpus.empty()) return Status::OK();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return Status::IOError("pin " + std::to_string(pid) + ": " + std::strerror(errno));
  Status result = Status::OK();
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
    if (::sched_setaffinity(tid, sizeof set, &set) != 0 && errno != ESRCH) {
      result = Status::IOError("pin thread " + std::to_string(tid) + " to CPUs " + IdListText(cpus) + ": " +
                               std::strerror(errno));
    }
  }
  ::closedir(d);
  return result;
}

}  // namespace rl::health
