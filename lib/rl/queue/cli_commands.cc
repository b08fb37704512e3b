// rl-queue serve, get, ack, nack, stat, meta, task, retire.
#include <malloc.h>

#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "rl/core/event_log.h"
#include "rl/core/json_field.h"
#include "rl/core/log.h"
#include "rl/core/signals.h"
#include "rl/queue/cli.h"
#include "rl/wire/json_value.h"

namespace rl::queue {

int RunServe(ServerOptions options, const std::string& run_dir, const std::string& id) {
  EventLog events;
  if (!run_dir.empty()) {
    if (Status s = events.Open(run_dir, "queue", id); !s.ok()) return Fail(s);
    options.events = &events;
  }
  const std::atomic<bool>& stop = InstallStopSignals();
  // Large requests and replies are allocated and freed on every turn; glibc would otherwise map
  // and unmap them each time (page faults were ~45% of a 64 KiB-row get, rl-profile measured).
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  auto server = Server::Open(std::move(options));
  if (!server.ok()) return Fail(server.status());
  Status s = (*server)->Run(stop);
  if (!s.ok()) return Fail(s);
  return kExitOk;
}

int RunGet(const ClientFlags& c, GetRequest req, std::ostream& out) {
  QueueClient client(c.ToOptions());
  auto reply = client.Get(req);
  if (!reply.ok()) return Fail(reply.status());
  for (const GotRow& row : reply->rows) {
    nlohmann::json j = {{"index", row.index}, {"lease", reply->lease}};
    for (const auto& [name, v] : row.columns) j[name] = ValueToJson(v);
    out << JsonText(j) << "\n";
  }
  if (reply->dropped || reply->regenerated) {
    spdlog::info("{} rows dropped, {} sent back for regeneration", reply->dropped, reply->regenerated);
  }
  if (reply->rows.empty()) spdlog::info("no rows ready for task '{}'", req.task);
  return kExitOk;
}

int RunAckOrNack(const ClientFlags& c, bool ack, const std::string& task, uint64_t lease,
                 std::vector<std::string> indices, std::istream& in, std::ostream& out) {
  if (indices.empty() && (ack || lease == 0)) {
    // From stdin: bare numbers, or JSON lines with "index" (what 'rl-queue get' prints).
    std::string line;
    while (std::getline(in, line)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_number_unsigned()) {
        indices.push_back(std::to_string(j.get<uint64_t>()));
      } else if (j.is_object() && j.contains("index") && j["index"].is_number_unsigned()) {
        indices.push_back(std::to_string(j["index"].get<uint64_t>()));
      } else {
        return Fail(Status::DataError("stdin: '" + line.substr(0, 60) + "' is neither an index nor a row with one"));
      }
    }
  }
  std::vector<uint64_t> idx;
  for (const auto& s : indices) {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 19) {
      return Fail(Status::InvalidArgument("'" + s + "' is not a row index"));
    }
    idx.push_back(std::stoull(s));
  }
  QueueClient client(c.ToOptions());
  auto reply = ack ? client.Ack(task, lease, idx) : client.Nack(task, lease, idx);
  if (!reply.ok()) return Fail(reply.status());
  const char* done = ack ? "acked" : "released";
  for (uint64_t i : reply->done) out << "{\"index\":" << i << ",\"" << done << "\":true}\n";
  for (uint64_t i : reply->rejected) out << "{\"index\":" << i << ",\"" << done << "\":false}\n";
  if (!reply->rejected.empty()) {
    return Fail(Status::Conflict(std::to_string(reply->rejected.size()) + " of " +
                                 std::to_string(reply->rejected.size() + reply->done.size()) +
                                 " rows refused (consumed already, or leased to another consumer)"));
  }
  return kExitOk;
}

int RunReleaseHolder(const ClientFlags& c, const std::string& task, const std::string& holder, uint64_t lease,
                     const std::vector<std::string>& indices, std::ostream& out) {
  if (holder.empty()) return Fail(Status::InvalidArgument("nack --holder needs a holder, KIND/ID"));
  if (lease != 0 || !indices.empty()) {
    return Fail(Status::InvalidArgument("nack --holder gives back all the holder's leases: no --lease-id, no indices"));
  }
  QueueClient client(c.ToOptions());
  auto reply = client.ReleaseHolder(task, holder);
  if (!reply.ok()) return Fail(reply.status());
  for (uint64_t i : reply->done) out << "{\"index\":" << i << ",\"released\":true}\n";
  spdlog::info("{} rows of task '{}' released from {}", reply->done.size(), task, holder);
  return kExitOk;
}

namespace {

// A name as stat's text shows it: bare when it is printable ASCII without spaces, commas, quotes or
// backslashes, else as a JSON string, so that a line splits into its fields unambiguously.
std::string Quoted(const std::string& name) {
  bool bare = !name.empty();
  for (unsigned char ch : name) bare = bare && ch > ' ' && ch < 0x7f && ch != '"' && ch != '\\' && ch != ',';
  return bare ? name : JsonText(nlohmann::json(name));
}

}  // namespace

int RunStat(const ClientFlags& c, bool json, std::ostream& out) {
  QueueClient client(c.ToOptions());
  auto stat = client.Stat();
  if (!stat.ok()) return Fail(stat.status());
  if (json) {
    out << JsonText(*stat) << "\n";
    return kExitOk;
  }
  // Read field by field with defaults ("-"): a server of another version may lack a field or
  // hold another type, and the text form must still print what there is.
  const nlohmann::json& j = *stat;
  auto count = [](const nlohmann::json& o, const char* k) {
    const nlohmann::json* f = FieldOf(o, k);
    return f != nullptr && f->is_number_integer() ? f->dump() : std::string("-");
  };
  out << "rows " << count(j, "rows") << "  bytes " << count(j, "bytes") << "  next_index " << count(j, "next_index")
      << "  log_bytes " << count(j, "log_bytes") << "  snapshot_bytes " << count(j, "snapshot_bytes") << "  fsync "
      << TextField(j, "fsync", "-") << "\n";
  const nlohmann::json& units = ArrayField(j, "units");
  if (!units.empty()) {
    out << "units";
    for (size_t u = 0; u < units.size(); ++u) {
      out << "  " << u << " " << (units[u].is_string() ? units[u].get<std::string>() : units[u].dump());
    }
    out << "\n";
  }
  out << std::left << std::setw(16) << "task" << std::right << std::setw(10) << "ready" << std::setw(8) << "groups"
      << std::setw(10) << "leased" << std::setw(12) << "consumed" << std::setw(10) << "dropped" << std::setw(10)
      << "holds" << "  columns\n";
  for (const auto& t : ArrayField(j, "tasks")) {
    std::string cols;
    for (const auto& col : ArrayField(t, "columns")) {
      if (col.is_string()) cols += (cols.empty() ? "" : ",") + Quoted(col.get<std::string>());
    }
    // An optional task holds no row; a server from before "holds" says nothing (both "-").
    const bool optional = BoolField(t, "optional", false);
    out << std::left << std::setw(16) << Quoted(TextField(t, "name")) << std::right << std::setw(10)
        << count(t, "ready") << std::setw(8) << count(t, "ready_groups") << std::setw(10) << count(t, "leased")
        << std::setw(12) << count(t, "consumed") << std::setw(10) << count(t, "dropped") << std::setw(10)
        << (optional ? "-" : count(t, "holds")) << "  " << cols << (optional ? " (optional)" : "") << "\n";
  }
  // Who holds the leased rows: a consumer that died shows here until its lease ends or its
  // successor gives them back.
  for (const auto& t : ArrayField(j, "tasks")) {
    const nlohmann::json& holders = ObjectField(t, "holders");
    if (holders.empty()) continue;
    out << "leases of " << Quoted(TextField(t, "name")) << ":";
    for (const auto& [holder, rows] : holders.items()) out << " " << Quoted(holder) << " " << rows;
    out << "\n";
  }
  return kExitOk;
}

int RunMeta(const ClientFlags& c, const std::vector<std::string>& args, const std::string& if_equals,
            bool has_if_equals, std::ostream& out) {
  QueueClient client(c.ToOptions());
  if (args.size() == 2 && args[0] == "get") {
    auto v = client.MetaGet(args[1]);
    if (!v.ok()) return Fail(v.status());
    if (!*v) return Fail(Status::NotFound("meta " + args[1] + " is not set"));
    out << **v << "\n";
    return kExitOk;
  }
  if (args.size() == 3 && args[0] == "set") {
    MetaRequest req{args[1], args[2], std::nullopt};
    if (has_if_equals) req.if_equals = if_equals;
    Status s = client.MetaSet(req);
    if (!s.ok()) return Fail(s);
    return kExitOk;
  }
  return Fail(Status::InvalidArgument("usage: rl-queue meta get KEY | meta set KEY VALUE [--if-equals OLD]"));
}

int RunTask(const ClientFlags& c, const std::string& task, const std::vector<std::string>& columns, bool optional) {
  QueueClient client(c.ToOptions());
  Status s = client.Declare(task, columns, optional);
  if (!s.ok()) return Fail(s);
  return kExitOk;
}

int RunRetire(const ClientFlags& c, const std::string& task, std::ostream& out) {
  QueueClient client(c.ToOptions());
  auto freed = client.Retire(task);
  if (!freed.ok()) return Fail(freed.status());
  out << JsonText(nlohmann::json({{"task", task}, {"freed", *freed}})) << "\n";
  spdlog::info("task '{}' retired; {} rows only it kept alive were freed", task, *freed);
  return kExitOk;
}

}  // namespace rl::queue
