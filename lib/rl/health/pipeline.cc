#include "rl/health/pipeline.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "rl/core/json_field.h"
#include "rl/health/slots.h"

namespace rl::health {
namespace {

template <typename T>
Status Number(const CLI::ConfigItem& item, const std::string& where, T* out) {
  if (item.inputs.size() != 1) return Status::Config(where + ": " + item.name + " wants one value");
  std::istringstream in(item.inputs[0]);
  T v{};
  if (!(in >> v) || !in.eof()) return Status::Config(where + ": " + item.name + " = '" + item.inputs[0] + "' is not a number");
  *out = v;
  return Status::OK();
}

Status Bool(const CLI::ConfigItem& item, const std::string& where, bool* out) {
  std::string v = item.inputs.size() == 1 ? item.inputs[0] : "";
  if (v != "true" && v != "false") return Status::Config(where + ": " + item.name + " wants true or false");
  *out = v == "true";
  return Status::OK();
}

Status Text(const CLI::ConfigItem& item, const std::string& where, std::string* out) {
  if (item.inputs.size() != 1) return Status::Config(where + ": " + item.name + " wants one string");
  *out = item.inputs[0];
  return Status::OK();
}

Status WatchdogKey(const CLI::ConfigItem& item, const std::string& where, PipelineSpec* p) {
  const std::string& k = item.name;
  if (k == "heartbeat") return Text(item, where, &p->heartbeat);
  if (k == "heartbeat_interval") return Number(item, where, &p->interval_s);
  if (k == "missed") return Number(item, where, &p->missed);
  if (k == "probe_window") return Number(item, where, &p->probe_window_s);
  if (k == "max_full_restarts") return Number(item, where, &p->max_full_restarts);
  if (k == "restart") return Text(item, where, &p->restart);
  if (k == "standby") return Bool(item, where, &p->standby);
  if (k == "grace") return Number(item, where, &p->grace_s);
  if (k == "slots") {
    p->slots = item.inputs;
    return Status::OK();
  }
  return Status::Config(where + ": unknown key '" + k + "' in [watchdog]");
}

Status PlacementKey(const CLI::ConfigItem& item, const std::string& where, PlacementSpec* p) {
  const std::string& k = item.name;
  if (k == "between") {
    p->between = item.inputs;
    if (p->between.size() != 2 || p->between[0] == p->between[1]) {
      return Status::Config(where + ": [placement] between wants two different role kinds");
    }
    return Status::OK();
  }
  if (k == "every") return Number(item, where, &p->every);
  if (k == "settle") return Number(item, where, &p->settle);
  if (k == "measure") return Number(item, where, &p->measure);
  if (k == "trainer") return Text(item, where, &p->trainer);
  if (k == "search") {
    RL_RETURN_IF_ERROR(Text(item, where, &p->search));
    if (p->search == "ternary" || p->search == "sweep") return Status::OK();
    return Status::Config(where + ": [placement] search must be ternary or sweep");
  }
  return Status::Config(where + ": unknown key '" + k + "' in [placement]");
}

Status RoleKey(const CLI::ConfigItem& item, const std::string& where, RoleSpec* r, bool* finish_set) {
  const std::string& k = item.name;
  if (k == "kind") return Text(item, where, &r->kind);
  if (k == "command") return Text(item, where, &r->command);
  if (k == "count") return Number(item, where, &r->count);
  if (k == "stall") return Number(item, where, &r->stall_s);
  if (k == "ready_timeout") return Number(item, where, &r->ready_s);
  if (k == "spares") return Number(item, where, &r->spares);
  if (k == "group") return Bool(item, where, &r->group);
  if (k == "slots") return Number(item, where, &r->slots);
  if (k == "finish") {
    *finish_set = true;
    return Bool(item, where, &r->finish);
  }
  return Status::Config(where + ": unknown key '" + k + "' in [role." + r->name + "]");
}

// Slots: each parses, the roles' instances fit in them, and a placement names two roles of one
// slot per instance.
Status CheckSlots(const PipelineSpec& p, const std::string& where) {
  bool gpus = false;
  for (const std::string& text : p.slots) {
    auto slot = ParseSlot(text);
    if (!slot.ok()) return Status::Config(where + ": [watchdog] " + slot.status().message());
    gpus |= !slot->gpus.empty();
  }
  int64_t wanted = 0;
  for (const RoleSpec& r : p.roles) {
    if (r.slots < 0 || r.slots > 4096) return Status::Config(where + ": [role." + r.name + "] slots out of range");
    if (r.slots > 0 && r.spares > 0 && gpus) {
      return Status::Config(where + ": [role." + r.name + "] has spares and slots with GPUs: a spare's CUDA devices "
                                    "are fixed when it starts, before it knows its slot");
    }
    wanted += static_cast<int64_t>(r.slots) * r.count;
  }
  if (wanted > static_cast<int64_t>(p.slots.size())) {
    return Status::Config(where + ": the roles' instances want " + std::to_string(wanted) + " slots and [watchdog] "
                          "slots has " + std::to_string(p.slots.size()));
  }
  const PlacementSpec& pl = p.placement;
  if (pl.between.empty()) return Status::OK();
  if (pl.settle < 0 || pl.measure < 1 || pl.every < 0) {
    return Status::Config(where + ": [placement] settle >= 0, measure >= 1 and every >= 0 are required");
  }
  for (const std::string& kind : pl.between) {
    auto r = std::find_if(p.roles.begin(), p.roles.end(), [&](const RoleSpec& x) { return x.kind == kind; });
    if (r == p.roles.end()) return Status::Config(where + ": [placement] between names '" + kind + "', no role's kind");
    if (r->slots != 1 || r->count < 1 || r->spares > 0 || r->group) {
      return Status::Config(where + ": [placement] moves slots one at a time: [role." + r->name +
                            "] needs slots = 1, count >= 1, no spares and no group");
    }
  }
  return Status::OK();
}

Status Check(const PipelineSpec& p, const std::string& where) {
  if (p.roles.empty()) return Status::Config(where + ": no [role.NAME] tables");
  if (p.restart != "role" && p.restart != "job") return Status::Config(where + ": restart must be role or job");
  if (p.interval_s < 0.01 || p.missed < 1 || p.max_full_restarts < 0 || p.grace_s < 0) {
    return Status::Config(where + ": heartbeat_interval, missed, max_full_restarts or grace out of range");
  }
  // Names and kinds become file names (logs/KIND-ID.log, events/KIND-ID.jsonl) and the keys of
  // state.json: letters, digits, '_' and '-' only, so no path, no space, no invalid UTF-8.
  auto plain = [](const std::string& s) {
    return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](unsigned char c) {
      return std::isalnum(c) || c == '_' || c == '-';
    });
  };
  std::map<std::string, const RoleSpec*> by_kind;
  for (const RoleSpec& r : p.roles) {
    if (!plain(r.name) || !plain(r.kind)) {
      const std::string& bad = plain(r.name) ? r.kind : r.name;
      return Status::Config(where + ": role " + (plain(r.name) ? "kind " : "name ") +
                            JsonText(nlohmann::json(bad)) +
                            ": names and kinds are 1 to 64 letters, digits, '_' or '-'");
    }
    // Instances are numbered from 0 in each table, and the watchdog knows them by kind/id.
    auto [first, fresh] = by_kind.emplace(r.kind, &r);
    if (!fresh) {
      return Status::Config(where + ": [role." + r.name + "] and [role." + first->second->name + "] are both of kind '" +
                            r.kind + "', and their instances would share the ids from 0; use one table with count");
    }
    if (r.command.empty()) return Status::Config(where + ": [role." + r.name + "] has no command");
    if (r.count < 1 || r.count > 1000) return Status::Config(where + ": [role." + r.name + "] count out of range (1 to 1000)");
    if (r.spares < 0 || r.spares > 16) return Status::Config(where + ": [role." + r.name + "] spares out of range (0 to 16)");
    if (r.group && r.spares > 0) {
      return Status::Config(where + ": [role." + r.name + "] is a group: spares cannot stand in for one of its ranks");
    }
  }
  return CheckSlots(p, where);
}

}  // namespace

Result<PipelineSpec> ParsePipeline(const std::string& toml_text, const std::string& name) {
  std::vector<CLI::ConfigItem> items;
  try {
    std::istringstream in(toml_text);
    items = CLI::ConfigTOML().from_config(in);
  } catch (const CLI::Error& e) {
    return Status::Config(name + ": " + e.what());
  }
  PipelineSpec p;
  std::map<std::string, bool> finish_set;
  for (const auto& item : items) {
    if (item.name == "++" || item.name == "--") continue;  // CLI11's section markers
    if (item.parents.size() == 1 && item.parents[0] == "watchdog") {
      RL_RETURN_IF_ERROR(WatchdogKey(item, name, &p));
      continue;
    }
    if (item.parents.size() == 1 && item.parents[0] == "placement") {
      RL_RETURN_IF_ERROR(PlacementKey(item, name, &p.placement));
      continue;
    }
    if (item.parents.size() != 2 || item.parents[0] != "role") {
      return Status::Config(name + ": '" + item.fullname() + "' is outside [watchdog] and [role.NAME]");
    }
    const std::string& role = item.parents[1];
    auto it = std::find_if(p.roles.begin(), p.roles.end(), [&](const RoleSpec& r) { return r.name == role; });
    if (it == p.roles.end()) {
      p.roles.push_back({});
      p.roles.back().name = role;
      p.roles.back().kind = role;
      it = p.roles.end() - 1;
    }
    RL_RETURN_IF_ERROR(RoleKey(item, name, &*it, &finish_set[role]));
  }
  for (RoleSpec& r : p.roles) {
    if (!finish_set[r.name]) r.finish = r.kind == "train";
  }
  RL_RETURN_IF_ERROR(Check(p, name));
  return p;
}

Result<PipelineSpec> LoadPipeline(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Config("cannot read the pipeline file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return ParsePipeline(text.str(), path);
}

}  // namespace rl::health
