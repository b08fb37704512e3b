#include "rl/queue/server.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/queue/unit_janitor.h"
#include "rl/queue/unit_protocol.h"
#include "rl/wire/client.h"

namespace rl::queue {

namespace {
constexpr int kMaxPollMs = 200;          // how often the stop flag is looked at
constexpr size_t kMaxRequestsPerTurn = 512;
constexpr size_t kMaxMessageLimit = 512u << 20;

void FreeBuffer(void* data, void*) { std::free(data); }
void DeleteString(void*, void* hint) { delete static_cast<std::string*>(hint); }

constexpr size_t kMaxSenderBytes = 256;  // rl-protocol(7) LIMITS

// What a decoded header may not say: rid 0 is the reply to a request that could not be decoded,
// and the sender id is kept (log, snapshots) with the sender's last request.
Status CheckHeader(const Header& h) {
  if (h.rid == 0) return Status::InvalidArgument("rid 0 is reserved for replies to undecodable requests");
  if (h.from.size() > kMaxSenderBytes) {
    return Status::InvalidArgument("sender id 'from' is over " + std::to_string(kMaxSenderBytes) + " bytes");
  }
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<Server>> Server::Open(ServerOptions options) {
  if (options.max_message > kMaxMessageLimit) {
    return Status::InvalidArgument("--max-message above 512 MiB: a log record must stay below 1 GiB");
  }
  std::unique_ptr<Server> s(new Server(std::move(options)));
  RecoveryReport report;
  // Under batch a reply waits for its records' write, not their sync: through the page cache
  // that write is a copy, where a direct one waits for the device.
  bool direct_log = s->options_.fsync != FsyncPolicy::kBatch;
  RL_ASSIGN_OR_RETURN(s->ds_, DurableStore::Open(s->options_.dir, s->options_.snapshot_bytes, &report, direct_log));
  spdlog::info("recovered {} records from {} log(s){}; {} rows live, next index {}", report.records, report.logs,
               report.had_snapshot ? " after a snapshot" : "", s->ds_->store().live_rows(),
               s->ds_->store().next_index());
  if (report.torn_bytes > 0) {
    spdlog::warn("cut a torn log tail of {} bytes ({})", report.torn_bytes, report.torn_reason);
  }
  if (s->options_.unit && !s->options_.declare.empty()) {
    return Status::InvalidArgument("a storage unit has no tasks to declare");
  }
  for (const auto& d : s->options_.declare) {
    // A task declared optional since (rl-queue task --optional) stays so, as under a get.
    bool optional = d.optional || s->ds_->store().IsOptional(d.task);
    RL_ASSIGN_OR_RETURN(auto rec, s->ds_->store().PlanDeclare(d.task, d.columns, optional));
    if (rec) s->ds_->Commit(*rec);
  }
  RL_RETURN_IF_ERROR(s->ds_->Sync());
  try {
    s->socket_ = std::make_unique<zmq::socket_t>(ZmqContext(), zmq::socket_type::router);
    s->socket_->set(zmq::sockopt::linger, 0);
    s->socket_->set(zmq::sockopt::router_mandatory, false);
    // A hard cap well above --max-message: bigger messages cost the peer its connection, the
    // ones in between get a TooLarge reply.
    s->socket_->set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(s->options_.max_message) * 2 + (1 << 20));
    s->socket_->bind(s->options_.bind);
    s->endpoint_ = s->socket_->get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("bind " + s->options_.bind + ": " + e.what());
  }
  RL_RETURN_IF_ERROR(s->OpenUnits());
  if (s->options_.events) {
    s->options_.events->Emit("serve", {{"endpoint", s->endpoint_}, {"records", report.records},
                                       {"torn_bytes", report.torn_bytes}});
  }
  return s;
}

Server::~Server() = default;

// Queues a reply behind everything committed so far. Bodies and blobs go to the socket in the
// buffers they were built in.
void Server::Reply(const std::string& routing, const Header& h, const Status& s, ReplyBody body) {
  Header out;
  out.op = h.op;
  out.rid = h.rid;
  out.seq = h.seq;
  out.status = static_cast<uint8_t>(s.code());
  out.msg = s.ok() ? "" : s.message();
  Outgoing o;
  o.frames.reserve(4 + body.blobs.size());
  o.frames.emplace_back(routing.data(), routing.size());
  o.frames.emplace_back(kProtocolId, sizeof(kProtocolId) - 1);
  std::string header = EncodeReplyHeader(out);
  o.frames.emplace_back(header.data(), header.size());
  if (!s.ok() || body.body.size() == 0) {
    o.frames.emplace_back(EmptyBody().data(), EmptyBody().size());
  } else {
    size_t size = body.body.size();
    o.frames.emplace_back(body.body.release(), size, FreeBuffer, nullptr);
  }
  for (auto& blob : body.blobs) {
    if (!s.ok()) break;
    if (blob.empty()) {
      o.frames.emplace_back();
      continue;
    }
    auto* owned = new std::string(std::move(blob));
    o.frames.emplace_back(owned->data(), owned->size(), DeleteString, owned);
  }
  o.need = ds_->appended();
  o.queued_ms = MonoMillis();
  pending_.push_back(std::move(o));
}

void Server::Commit(Record r, const std::string& routing, const Header& h) {
  r.sender = h.from;
  r.rid = h.rid;
  ds_->Commit(r);
  changed_ = true;
  ++commits_;
  Reply(routing, h, Status::OK(), ReplyFor(r, ds_->store()));
}

// parts: the routing frame, then the request's frames. The body is decoded in its frame.
void Server::HandleFrames(std::vector<zmq::message_t>& parts) {
  if (parts.empty()) return;
  auto view = [](const zmq::message_t& m) { return std::string_view(m.data<char>(), m.size()); };
  std::string routing(view(parts[0]));
  if (parts.size() < 4) {
    Reply(routing, Header(), Status::Protocol("a message has " + std::to_string(parts.size() - 1) + " frames, needs 3"));
    return;
  }
  auto header = DecodeRequestHeader(view(parts[1]), view(parts[2]));
  if (!header.ok()) {
    Reply(routing, Header(), header.status());  // rid unknown: 0
    return;
  }
  if (Status s = CheckHeader(*header); !s.ok()) {
    Reply(routing, *header, s);
    return;
  }
  size_t total = 0;
  for (size_t i = 1; i < parts.size(); ++i) total += parts[i].size();
  if (total > options_.max_message) {
    Reply(routing, *header,
          Status::TooLarge("message of " + std::to_string(total) + " bytes is above --max-message " +
                           std::to_string(options_.max_message)));
    return;
  }
  // The body frame is kept whole: a put's large values stay in it, for the store and the log.
  auto body = std::make_shared<zmq::message_t>(std::move(parts[3]));
  Request req{std::move(*header), view(*body), {}, body};
  for (size_t i = 4; i < parts.size(); ++i) req.blobs.emplace_back(view(parts[i]));
  Dispatch(routing, req);
}

void Server::Dispatch(const std::string& routing, const Request& req) {
  const Header& h = req.header;
  Op op = static_cast<Op>(h.op);
  bool mutating = op == Op::kPut || op == Op::kGet || op == Op::kAck || op == Op::kNack || op == Op::kMetaSet ||
                  op == Op::kDeclare || op == kOpRetire || op == kOpFree;
  if (mutating && !h.from.empty()) {
    // A retry of a request already carried out gets the same answer, and changes nothing.
    const Record* last = ds_->store().LastOf(h.from);
    if (last && last->rid == h.rid) {
      Reply(routing, h, Status::OK(), ReplyFor(*last, ds_->store()));
      return;
    }
    for (Waiter& w : waiters_) {
      if (w.header.from == h.from && w.header.rid == h.rid) {
        w.routing = routing;  // the client reconnected while its get waits
        return;
      }
    }
  }
  Status s;
  bool unit_op = op == kOpRead || op == kOpFree || op == kOpList || op == kOpHeld;
  if (unit_op || (options_.unit && op != Op::kPing && op != Op::kStat)) {
    s = DispatchUnitOp(routing, req);
    if (!s.ok()) Reply(routing, h, s);
    return;
  }
  switch (op) {
    case Op::kPing: {
      ReplyBody m;
      Packer pk(m.body);
      pk.pack_map(1);
      PackString(pk, "time_ms");
      pk.pack_int64(WallMillis());
      Reply(routing, h, Status::OK(), std::move(m));
      return;
    }
    case Op::kPut: s = HandlePut(routing, req); break;
    case Op::kGet: s = HandleGet(routing, req); break;
    case Op::kAck:
    case Op::kNack: s = HandleIndices(routing, req); break;
    case Op::kStat:
      Reply(routing, h, Status::OK(),
            EncodeStatReply(ds_->store(), ds_->log_bytes(), ds_->snapshot_bytes(), FsyncPolicyName(options_.fsync),
                            options_.units));
      return;
    case Op::kMetaGet:
    case Op::kMetaSet: s = HandleMeta(routing, req); break;
    case Op::kDeclare: s = HandleDeclare(routing, req); break;
    default:
      s = op == kOpRetire ? HandleRetire(routing, req) : Status::Protocol("unknown op " + std::to_string(h.op));
      break;
  }
  if (!s.ok()) Reply(routing, h, s);
}

Status Server::HandlePut(const std::string& routing, const Request& req) {
  RL_ASSIGN_OR_RETURN(PutCommand put, DecodePutCommand(req.body, req.blobs, req.frame));
  int64_t staged_ms = 0;  // a unit's stamp, which its reply tells
  if (options_.unit) {
    staged_ms = WallMillis();
    RL_RETURN_IF_ERROR(StageOnUnit(put, staged_ms));
  } else {
    RL_RETURN_IF_ERROR(CheckRefs(put));
  }
  // Several tensors may name one frame; the log stores each in full, so the limit applies to
  // the values as stored, not only to the message (a log record must stay below 1 GiB).
  size_t stored = 0;
  for (const auto& r : put.rows) {
    for (const auto& [name, c] : r.columns) stored += name.size() + c.MemoryBytes();
  }
  if (stored > options_.max_message) {
    return Status::TooLarge("put of " + std::to_string(stored) + " bytes of values is above --max-message " +
                            std::to_string(options_.max_message));
  }
  // An update's renewed deadline comes from the server's clock now, and is logged with it.
  auto rec = put.update_task.empty()
                 ? ds_->store().PlanPut(std::move(put.rows), put.ack_task, put.ack_lease)
                 : ds_->store().PlanUpdate(std::move(put.rows), put.update_task, put.update_lease, put.renew_ms,
                                           WallMillis());
  if (!rec.ok()) return rec.status();
  rec->deadline_ms = options_.unit ? staged_ms : rec->deadline_ms;
  Commit(std::move(*rec), routing, req.header);
  return Status::OK();
}

Status Server::HandleDeclare(const std::string& routing, const Request& req) {
  RL_ASSIGN_OR_RETURN(DeclareRequest d, DecodeDeclare(req.body));
  RL_ASSIGN_OR_RETURN(auto rec, ds_->store().PlanDeclare(d.task, d.columns, d.optional));
  if (rec) {
    Commit(std::move(*rec), routing, req.header);
  } else {
    Record same;
    same.type = RecordType::kDeclare;
    same.task = d.task;
    same.columns = d.columns;
    same.optional = d.optional;
    Reply(routing, req.header, Status::OK(), ReplyFor(same, ds_->store()));
  }
  return Status::OK();
}

// Its parked gets are answered first: after the retirement their task is gone.
Status Server::HandleRetire(const std::string& routing, const Request& req) {
  RL_ASSIGN_OR_RETURN(std::string task, DecodeRetire(req.body));
  RL_ASSIGN_OR_RETURN(Record rec, ds_->store().PlanRetire(task));
  DropWaiters(task, "", Status::NotFound("task '" + task + "' was retired while this get waited"));
  spdlog::info("task '{}' retired: {} rows freed", task, rec.freed);
  Commit(std::move(rec), routing, req.header);
  return Status::OK();
}

Status Server::HandleGet(const std::string& routing, const Request& req) {
  RL_ASSIGN_OR_RETURN(GetRequest get, DecodeGet(req.body));
  RL_RETURN_IF_ERROR(CheckGet(get));  // before the implicit declaration (error precedence)
  if (!get.columns.empty()) {
    // An existing task keeps its kind: a get compares columns only.
    RL_ASSIGN_OR_RETURN(auto rec, ds_->store().PlanDeclare(get.task, get.columns, ds_->store().IsOptional(get.task)));
    if (rec) {
      ds_->Commit(*rec);  // implicit declaration: logged, no reply of its own
      changed_ = true;
    }
  }
  Waiter w{routing, req.header, std::move(get), MonoMillis()};
  w.deadline_ms += w.req.wait_ms;
  if (!TryServe(w, w.req.wait_ms == 0)) waiters_.push_back(std::move(w));
  return Status::OK();
}

bool Server::TryServe(Waiter& w, bool final_attempt) {
  auto plan = ds_->store().PlanGet(w.req, WallMillis());
  if (!plan.ok()) {
    Reply(w.routing, w.header, plan.status());
    return true;
  }
  if (!plan->takeover && ClaimEmptyPart(w.req)) {
    Record empty;
    empty.type = RecordType::kLease;
    empty.task = w.req.task;
    Reply(w.routing, w.header, Status::OK(), ReplyFor(empty, ds_->store()));
    return true;
  }
  size_t got = plan->indices.size();
  for (const auto& r : plan->reserved) got += r.indices.size();
  size_t parts = w.req.balance.empty() ? 1 : w.req.parts;
  size_t need = size_t{w.req.min ? w.req.min : w.req.count} * parts;
  if (!final_attempt && !plan->takeover && !plan->full && got < need) return false;
  NoteEmptyParts(w.req, *plan);
  bool effect = !plan->indices.empty() || !plan->dropped.empty() || !plan->regenerated.empty() || plan->takeover;
  if (effect) {
    Commit(std::move(*plan), w.routing, w.header);
  } else {
    Reply(w.routing, w.header, Status::OK(), ReplyFor(*plan, ds_->store()));
  }
  return true;
}

void Server::NoteEmptyParts(const GetRequest& req, const Record& plan) {
  if (req.balance.empty() || req.parts < 2 || plan.takeover || plan.indices.empty()) return;
  auto& owed = empty_parts_[req.task];
  for (size_t p = 1 + plan.reserved.size(); p < req.parts; ++p) owed.push_back(plan.deadline_ms);
}

// Without it, a consumer whose part of a round was empty waited out its whole wait for rows the
// round had dealt to the others, while they waited for it (a data-parallel trainer's ranks meet
// after every get): about 0.2 s a step with two ranks.
bool Server::ClaimEmptyPart(const GetRequest& req) {
  if (req.balance.empty() || req.parts < 2) return false;
  auto it = empty_parts_.find(req.task);
  if (it == empty_parts_.end()) return false;
  const int64_t now = WallMillis();
  auto& owed = it->second;
  while (!owed.empty() && owed.front() <= now) owed.pop_front();  // unclaimed until its deadline
  bool claimed = !owed.empty();
  if (claimed) owed.pop_front();
  if (owed.empty()) empty_parts_.erase(it);
  return claimed;
}

// Parked gets in arrival order: serve those that can be, answer those whose wait is over. A get
// served in a pass may make rows ready for a get earlier in the list (a trainer's get that sends
// stale rows back to `generate`, where the rollouts' gets wait): a pass that committed anything is
// followed by another, or those gets would sit out their wait with rows ready for them.
void Server::ServeWaiters(bool expire_only) {
  for (bool again = true; again && !waiters_.empty();) {
    const uint64_t commits = commits_;
    int64_t now = MonoMillis();
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      bool final_attempt = it->deadline_ms <= now;
      if ((expire_only && !final_attempt) || !TryServe(*it, final_attempt)) {
        ++it;
      } else {
        it = waiters_.erase(it);
      }
    }
    again = commits_ != commits;  // each pass that commits serves a get: at most one pass per get
    expire_only = false;
  }
}

Status Server::HandleIndices(const std::string& routing, const Request& req) {
  RL_ASSIGN_OR_RETURN(IndexRequest r, DecodeIndices(req.body));
  bool ack = static_cast<Op>(req.header.op) == Op::kAck;
  if (ack && !r.holder.empty()) return Status::InvalidArgument("ack takes no holder (only nack does)");
  auto rec = ack                  ? ds_->store().PlanAck(r.task, r.lease, r.indices)
             : r.holder.empty() ? ds_->store().PlanRelease(r.task, r.lease, r.indices)
                                : ds_->store().PlanReleaseHolder(r.task, r.holder);
  if (!rec.ok()) return rec.status();
  // A get the dead process left parked would otherwise still be served, after the release, and
  // lease rows again to a holder nobody is behind. (ZeroMQ does not tell the server that a peer
  // went away.) Should its sender be alive after all, it hears why.
  if (!r.holder.empty()) {
    DropWaiters(r.task, r.holder, Status::Conflict("the leases of " + r.holder + " were given back by a newer process"));
  }
  Commit(std::move(*rec), routing, req.header);
  return Status::OK();
}

void Server::DropWaiters(const std::string& task, const std::string& holder, const Status& why) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->req.task == task && (holder.empty() || it->req.holder == holder)) {
      Reply(it->routing, it->header, why);
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

Status Server::HandleMeta(const std::string& routing, const Request& req) {
  if (static_cast<Op>(req.header.op) == Op::kMetaGet) {
    RL_ASSIGN_OR_RETURN(std::string key, DecodeMetaGet(req.body));
    ReplyBody m;
    Packer pk(m.body);
    pk.pack_map(1);
    PackString(pk, "value");
    auto v = ds_->store().Meta(key);
    if (v) {
      PackString(pk, *v);
    } else {
      pk.pack_nil();
    }
    Reply(routing, req.header, Status::OK(), std::move(m));
    return Status::OK();
  }
  RL_ASSIGN_OR_RETURN(MetaRequest m, DecodeMetaSet(req.body));
  if (m.key == kUnitsKey || m.key == kUnitMinBytesKey) {
    return Status::InvalidArgument(m.key + " is set by the server alone (--units, --unit-min-bytes)");
  }
  RL_ASSIGN_OR_RETURN(Record rec, ds_->store().PlanMetaSet(m.key, m.value, m.if_equals));
  Commit(std::move(rec), routing, req.header);
  return Status::OK();
}

void Server::ExpireLeases() {
  for (Record& r : ds_->store().PlanExpiries(WallMillis())) {
    spdlog::debug("lease {} of task {} expired: {} rows ready again", r.lease, r.task, r.indices.size());
    if (options_.events) {
      options_.events->Emit("lease_expired", {{"task", r.task}, {"lease", r.lease}, {"rows", r.indices.size()}});
    }
    ds_->Commit(r);
    changed_ = true;
  }
}

// Hands the turn's records to the log writer and asks for the next fdatasync whenever records
// wait for one (group commit: the writer syncs as soon as it is free, and what arrives during a
// sync goes into the next), then sends the replies whose records are as far as the policy says
// (ReplyGate), in order.
Status Server::SendPending(bool force_sync) {
  RL_RETURN_IF_ERROR(ds_->status());
  bool syncs = options_.fsync != FsyncPolicy::kNever;
  if (force_sync) {
    RL_RETURN_IF_ERROR(syncs ? ds_->Sync() : ds_->Flush());
  } else if (syncs && sync_asked_ < ds_->appended()) {
    ds_->RequestSync();
    sync_asked_ = ds_->appended();
  } else {
    ds_->Submit();
  }
  uint64_t synced = ds_->synced();
  PassReleased(syncs ? synced : ds_->written());
  int64_t now = MonoMillis();
  uint64_t done = gate_.Limit(ds_->written(), synced, now);
  while (!pending_.empty() && pending_.front().need <= done) {
    auto& frames = pending_.front().frames;
    try {
      for (size_t i = 0; i < frames.size(); ++i) {
        socket_->send(frames[i], i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
      }
    } catch (const zmq::error_t& e) {
      spdlog::debug("reply dropped: {}", e.what());  // the peer is gone; it will retry
    }
    gate_.Sent(pending_.front().need, synced, now);
    pending_.pop_front();
    ++served_;
  }
  return Status::OK();
}

int Server::PollTimeoutMs() const {
  int64_t now_wall = WallMillis(), now = MonoMillis();
  int64_t t = kMaxPollMs;
  int64_t lease = ds_->store().NextDeadline();
  if (lease != INT64_MAX) t = std::min(t, lease - now_wall + 1);
  for (const Waiter& w : waiters_) t = std::min(t, w.deadline_ms - now);
  return static_cast<int>(std::max<int64_t>(0, t));
}

Status Server::Run(const std::atomic<bool>& stop) {
  spdlog::info("serving {} from {} (fsync {})", endpoint_, options_.dir, FsyncPolicyName(options_.fsync));
  while (!stop.load()) {
    zmq::pollitem_t items[2] = {{static_cast<void*>(*socket_), 0, ZMQ_POLLIN, 0},
                                {nullptr, ds_->notify_fd(), ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(PollTimeoutMs()));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) return Status::Internal(std::string("poll: ") + e.what());
      continue;
    }
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t count;
      ssize_t n = ::read(ds_->notify_fd(), &count, sizeof(count));  // the log advanced
      (void)n;
    }
    changed_ = false;
    for (size_t n = 0; n < kMaxRequestsPerTurn; ++n) {
      std::vector<zmq::message_t> parts;
      try {
        parts.emplace_back();
        if (!socket_->recv(parts.back(), zmq::recv_flags::dontwait)) break;
        while (parts.back().more()) {
          parts.emplace_back();
          if (!socket_->recv(parts.back(), zmq::recv_flags::none)) break;
        }
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) break;
        return Status::Internal(std::string("recv: ") + e.what());
      }
      HandleFrames(parts);
    }
    ExpireLeases();
    ServeWaiters(!changed_);
    RL_RETURN_IF_ERROR(ds_->MaybeSnapshot(options_.fsync != FsyncPolicy::kNever));
    CollectReleased();
    RL_RETURN_IF_ERROR(SendPending(false));
  }
  RL_RETURN_IF_ERROR(SendPending(true));
  spdlog::info("stopped after {} replies", served_);
  return Status::OK();
}

}  // namespace rl::queue
