// Server: rl-queue's ROUTER loop. One thread owns the socket and the DurableStore.
//
// Each turn of the loop: poll the socket and the log writer's eventfd (timeout = the nearest
// deadline: a lease, a waiting get), take every waiting request, expire leases,
// serve parked gets that can now be served, hand the turn's records to the log's writer thread
// with a request to sync them as soon as it is free (group commit), and send the replies whose
// records are synced (--fsync always), written (batch, while no reply has waited for its sync
// longer than --fsync-interval-ms), or at once (never, unless the writer is more than 16 MiB
// behind). A reply waits for every record committed before it, so what it says is never ahead of
// the log.
// A malformed, unknown or oversized request gets an error reply and the loop goes on.
// Thread safety: Run on one thread; RequestStop from any thread or a signal handler.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "rl/core/event_log.h"
#include "rl/queue/durable.h"
#include "rl/queue/protocol.h"
#include "rl/queue/reply_gate.h"
#include "rl/queue/unit_janitor.h"

namespace rl::queue {

struct ServerOptions {
  std::string bind = "tcp://127.0.0.1:5555";
  std::string dir;
  FsyncPolicy fsync = FsyncPolicy::kBatch;
  int fsync_interval_ms = 5;
  size_t max_message = 64u << 20;
  uint64_t snapshot_bytes = 256u << 20;
  std::vector<DeclareRequest> declare;
  EventLog* events = nullptr;  // may be null; must outlive the server
  // A storage unit (rl-queue unit): takes puts of new rows, stamped with its clock (staged_ms),
  // read, free and list; no tasks, and its rows go only when freed (docs/design.md "Storage units").
  bool unit = false;
  // A controller (rl-queue serve --units): the units' endpoints, in order; a reference names its
  // unit by its place here. Published as the metadata key queue.units.
  std::vector<std::string> units;
  int64_t unit_grace_ms = 60000;  // a staged row nothing refers to is freed once this old
  uint64_t unit_min_bytes = 1024;  // values from this size go to the units (queue.unit_min_bytes)
};


class Server {
 public:
  static Result<std::unique_ptr<Server>> Open(ServerOptions options);
  ~Server();
  // Serves until *stop becomes true. Returns an error only when the log cannot be written.
  Status Run(const std::atomic<bool>& stop);
  const std::string& endpoint() const { return endpoint_; }  // the bound endpoint, port resolved

 private:
  struct Waiter {  // a get parked until enough rows are ready or its wait ends
    std::string routing;
    Header header;
    GetRequest req;
    int64_t deadline_ms;
  };
  struct Outgoing {
    std::vector<zmq::message_t> frames;  // routing frame first
    uint64_t need = 0;                   // the log position that must be written or synced first
    int64_t queued_ms = 0;
  };
  explicit Server(ServerOptions options)
      : options_(std::move(options)), gate_(options_.fsync, options_.fsync_interval_ms) {}

  void HandleFrames(std::vector<zmq::message_t>& parts);
  void Dispatch(const std::string& routing, const Request& req);
  Status HandlePut(const std::string& routing, const Request& req);
  Status HandleGet(const std::string& routing, const Request& req);
  Status HandleIndices(const std::string& routing, const Request& req);
  Status HandleMeta(const std::string& routing, const Request& req);
  Status HandleDeclare(const std::string& routing, const Request& req);
  Status HandleRetire(const std::string& routing, const Request& req);
  // Storage units (server_units.cc).
  Status OpenUnits();  // publishes queue.units and starts the janitor (a controller)
  Status CheckRefs(const PutCommand& put) const;
  Status StageOnUnit(PutCommand& put, int64_t staged_ms) const;  // a unit's put: new rows only, stamped
  Status DispatchUnitOp(const std::string& routing, const Request& req);
  Status HandleHeld(const std::string& routing, const Request& req);
  // Unit rows no row refers to any more go to the janitor once the log holds why.
  void CollectReleased();
  void PassReleased(uint64_t durable);
  // Tries to serve a get; returns false when it should wait longer.
  bool TryServe(Waiter& w, bool final_attempt);
  // A balanced round dealt fewer non-empty parts than `parts`: the rest are empty parts, each
  // owed to one of the other consumers of the round (man/rl-protocol.7, get, step 3). Held here,
  // not in the log: an empty part holds no rows, and one lost with the server only makes a get
  // wait out its wait.
  void NoteEmptyParts(const GetRequest& req, const Record& plan);
  bool ClaimEmptyPart(const GetRequest& req);
  void ServeWaiters(bool expire_only);
  // Answers the parked gets of `task` (of `holder` only, unless it is empty) with `why`.
  void DropWaiters(const std::string& task, const std::string& holder, const Status& why);
  void ExpireLeases();
  void Commit(Record r, const std::string& routing, const Header& h);
  void Reply(const std::string& routing, const Header& h, const Status& s, ReplyBody body = ReplyBody());
  Status SendPending(bool force_sync);
  int PollTimeoutMs() const;

  ServerOptions options_;
  std::unique_ptr<DurableStore> ds_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::string endpoint_;
  std::deque<Waiter> waiters_;
  std::map<std::string, std::deque<int64_t>> empty_parts_;  // task -> the deadlines of its empty parts
  std::deque<Outgoing> pending_;  // replies waiting for the log, in order of `need`
  uint64_t sync_asked_ = 0;       // the log position an fdatasync was last asked for
  ReplyGate gate_;
  bool changed_ = false;          // records committed this turn
  uint64_t served_ = 0;
  uint64_t commits_ = 0;          // records committed in all (ServeWaiters' passes compare it)
  std::deque<std::pair<uint64_t, std::vector<uint64_t>>> releasing_;  // (log position, UnitKeys)
  std::unique_ptr<UnitJanitor> janitor_;
};

}  // namespace rl::queue
