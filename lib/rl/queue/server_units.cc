// Server: storage units and their controller (docs/design.md "Storage units").
#include <unordered_set>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/queue/server.h"
#include "rl/queue/unit_janitor.h"
#include "rl/queue/unit_protocol.h"
#include "rl/queue/unit_ref.h"

namespace rl::queue {
namespace {

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

std::string Where(size_t n, const std::string& column) {
  return "row " + std::to_string(n) + " column '" + column + "'";
}

ReplyBody BodyOf(const std::string& bytes) {
  ReplyBody m;
  m.body.write(bytes.data(), bytes.size());
  return m;
}

}  // namespace

// The units a queue's rows refer to are part of its state: the list is kept in the log under
// queue.units, and a restart must name the same units in the same order.
Status Server::OpenUnits() {
  auto published = ds_->store().Meta(kUnitsKey);
  std::string list = Join(options_.units);
  if (options_.units.empty()) {
    if (published && !published->empty()) {
      return Status::Config("the rows of this queue refer to storage units: start it with --units " + *published);
    }
    return Status::OK();
  }
  if (options_.unit) return Status::InvalidArgument("a storage unit has no storage units of its own");
  if (options_.units.size() > kMaxUnits) return Status::InvalidArgument("more than 1024 storage units");
  if (options_.unit_grace_ms < 1000) return Status::InvalidArgument("--unit-grace-ms below 1000");
  if (published && *published != list) {
    return Status::Config("--units " + list + " is not the list this queue's rows refer to: " + *published);
  }
  if (options_.unit_min_bytes < 1) return Status::InvalidArgument("--unit-min-bytes below 1");
  // The size may change from one start to the next: it decides only where new values go.
  std::vector<std::pair<const char*, std::string>> meta = {{kUnitsKey, list},
                                                           {kUnitMinBytesKey, std::to_string(options_.unit_min_bytes)}};
  for (const auto& [key, value] : meta) {
    if (ds_->store().Meta(key) == value) continue;
    RL_ASSIGN_OR_RETURN(Record rec, ds_->store().PlanMetaSet(key, value, std::nullopt));
    ds_->Commit(rec);
  }
  RL_RETURN_IF_ERROR(ds_->Sync());
  JanitorOptions jo;
  jo.units = options_.units;
  jo.controller = endpoint_;
  jo.grace_ms = options_.unit_grace_ms;
  jo.interval_ms = std::max<int64_t>(options_.unit_grace_ms / 4, 250);
  janitor_ = std::make_unique<UnitJanitor>(std::move(jo));
  janitor_->Release(ds_->TakeReleased());  // released by records replayed: all in the log
  spdlog::info("controller of {} storage unit(s): {}", options_.units.size(), list);
  return Status::OK();
}

// A put to a controller names each unit it refers to by number, and no staging older than half the
// grace: the janitor frees unreferenced rows only once a grace old, so a reference accepted now
// can never name a row it has freed (as long as the clocks agree to within half the grace).
Status Server::CheckRefs(const PutCommand& put) const {
  int64_t oldest = WallMillis() - options_.unit_grace_ms / 2;
  for (size_t n = 0; n < put.rows.size(); ++n) {
    for (const auto& [name, c] : put.rows[n].columns) {
      if (!c.is_ref()) continue;
      if (options_.units.empty()) {
        return Status::InvalidArgument(Where(n, name) + " is a unit reference, and this queue has no storage units");
      }
      if (name == kGroupColumn || name == kVersionColumn) {
        return Status::InvalidArgument(Where(n, name) + ": the controller holds this column's values itself");
      }
      if (c.ref().unit >= options_.units.size()) {
        return Status::InvalidArgument(Where(n, name) + " refers to unit " + std::to_string(c.ref().unit) + " of " +
                                       std::to_string(options_.units.size()));
      }
      if (c.ref().staged_ms < oldest) {
        return Status::Timeout(std::string(kStaleStaging) + ": " + Where(n, name) + " was staged " +
                               std::to_string(WallMillis() - c.ref().staged_ms) + " ms ago, over half the grace of " +
                               std::to_string(options_.unit_grace_ms) + " ms; stage it again");
      }
    }
  }
  return Status::OK();
}

Status Server::StageOnUnit(PutCommand& put, int64_t staged_ms) const {
  if (!put.ack_task.empty() || !put.update_task.empty()) {
    return Status::InvalidArgument("a storage unit takes new rows only: no ack_task, no update_task");
  }
  for (size_t n = 0; n < put.rows.size(); ++n) {
    PutRow& row = put.rows[n];
    if (!row.is_new) return Status::InvalidArgument("row " + std::to_string(n) + ": a storage unit takes new rows only");
    for (const auto& [name, c] : row.columns) {
      if (name == kStagedColumn || name == kGroupColumn || c.is_ref()) {
        return Status::InvalidArgument(Where(n, name) + ": not a column a storage unit stages");
      }
    }
    row.columns.emplace_back(kStagedColumn, Value(staged_ms));
  }
  return Status::OK();
}

Status Server::DispatchUnitOp(const std::string& routing, const Request& req) {
  const Header& h = req.header;
  Op op = static_cast<Op>(h.op);
  if (op == kOpHeld) {
    if (!janitor_) return Status::InvalidArgument("held is a controller's op: this server has no storage units");
    return HandleHeld(routing, req);
  }
  if (!options_.unit) {
    return Status::InvalidArgument("op " + OpName(h.op) + " is a storage unit's: this server is not one");
  }
  if (op == Op::kPut) return HandlePut(routing, req);
  if (op == kOpRead) {
    RL_ASSIGN_OR_RETURN(ReadRequest r, DecodeRead(req.body));
    Reply(routing, h, Status::OK(), ReadReplyFor(ds_->store().ViewColumns(r.indices, r.columns)));
    return Status::OK();
  }
  if (op == kOpFree) {
    RL_ASSIGN_OR_RETURN(std::vector<uint64_t> indices, DecodeFree(req.body));
    RL_ASSIGN_OR_RETURN(Record rec, ds_->store().PlanFree(indices));
    Commit(std::move(rec), routing, h);
    return Status::OK();
  }
  if (op == kOpList) {
    RL_ASSIGN_OR_RETURN(ListRequest r, DecodeList(req.body));
    ListReply out;
    out.now_ms = WallMillis();
    out.indices = ds_->store().RowsBefore(kStagedColumn, out.now_ms - r.age_ms + 1, r.from, r.limit);
    Reply(routing, h, Status::OK(), BodyOf(EncodeListReply(out)));
    return Status::OK();
  }
  return Status::InvalidArgument("a storage unit takes ping, put, stat, read, free and list; not " + OpName(h.op));
}

// Unit rows released by records not yet in the log count as held: freed now, they would be lost
// should the controller die before the record is written. That includes rows released earlier in
// this turn, which the store still holds as released until they are collected: collect them first.
Status Server::HandleHeld(const std::string& routing, const Request& req) {
  RL_ASSIGN_OR_RETURN(HeldRequest r, DecodeHeld(req.body));
  CollectReleased();
  if (r.unit >= options_.units.size()) {
    return Status::InvalidArgument("held: unit " + std::to_string(r.unit) + " of " + std::to_string(options_.units.size()));
  }
  std::unordered_set<uint64_t> pending;
  for (const auto& [pos, keys] : releasing_) pending.insert(keys.begin(), keys.end());
  std::vector<uint64_t> held;
  for (uint64_t i : r.indices) {
    uint64_t key = UnitKey(r.unit, i & kMaxUnitRow);
    if (i <= kMaxUnitRow && (ds_->store().HoldsUnitRow(key) || pending.count(key))) held.push_back(i);
  }
  Reply(routing, req.header, Status::OK(), BodyOf(EncodeHeldReply(held)));
  return Status::OK();
}

void Server::CollectReleased() {
  std::vector<uint64_t> keys = ds_->TakeReleased();
  if (janitor_ && !keys.empty()) releasing_.emplace_back(ds_->appended(), std::move(keys));
}

void Server::PassReleased(uint64_t durable) {
  while (!releasing_.empty() && releasing_.front().first <= durable) {
    janitor_->Release(std::move(releasing_.front().second));
    releasing_.pop_front();
  }
}

}  // namespace rl::queue
