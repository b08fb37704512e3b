#include "rl/queue/unit_janitor.h"

#include <algorithm>
#include <map>
#include <memory>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/queue/unit_client.h"
#include "rl/queue/unit_ref.h"

namespace rl::queue {
namespace {

ClientOptions CallOptions(const std::string& endpoint, double give_up_s, const std::atomic<bool>* halt) {
  ClientOptions o;
  o.stop = halt;
  o.endpoint = endpoint;
  o.sender = NewSenderId("janitor");
  o.give_up_s = give_up_s;
  o.attempt_timeout_ms = 2000;
  return o;
}

// The janitor's connections, made on its own thread.
struct Peers {
  std::vector<std::unique_ptr<UnitClient>> units;
  std::unique_ptr<Client> controller;
};

// Frees `keys` on their units; returns those a unit could not be reached for.
std::vector<uint64_t> FreeKeys(Peers& peers, const std::vector<uint64_t>& keys, std::atomic<uint64_t>* freed) {
  std::map<uint32_t, std::vector<uint64_t>> by_unit;
  for (uint64_t k : keys) by_unit[KeyUnit(k)].push_back(KeyRow(k));
  std::vector<uint64_t> left;
  for (auto& [unit, rows] : by_unit) {
    if (unit >= peers.units.size()) continue;  // a reference to a unit this controller lacks: none
    auto r = peers.units[unit]->Free(rows);
    if (!r.ok()) {
      spdlog::warn("janitor: unit {} did not free {} rows: {}", unit, rows.size(), r.status().ToString());
      for (uint64_t row : rows) left.push_back(UnitKey(unit, row));
      continue;
    }
    *freed += r->done.size();
  }
  return left;
}

// Orphans of one unit among its rows from `*from`: staged at least grace ago, and no row of the
// controller refers to them. Moves *from past the page; 0 when it was the last.
Status ReconcilePage(Peers& peers, uint32_t unit, int64_t grace_ms, uint64_t* from, std::atomic<uint64_t>* freed) {
  ListRequest list;
  list.age_ms = grace_ms;
  list.from = *from;
  RL_ASSIGN_OR_RETURN(ListReply old, peers.units[unit]->List(list));
  *from = old.indices.size() < list.limit ? 0 : old.indices.back() + 1;
  if (old.indices.empty()) return Status::OK();
  // As a call that waits on the server (1 ms), it gives up at once when the janitor stops: the
  // controller, which stops first, does not answer any more.
  RL_ASSIGN_OR_RETURN(Message reply, peers.controller->Call(kOpHeld, EncodeHeld({unit, old.indices}), {}, 1));
  RL_ASSIGN_OR_RETURN(std::vector<uint64_t> held, DecodeHeldReply(reply.body));
  std::sort(held.begin(), held.end());
  std::vector<uint64_t> orphans;
  for (uint64_t i : old.indices) {
    if (!std::binary_search(held.begin(), held.end(), i)) orphans.push_back(i);
  }
  if (orphans.empty()) return Status::OK();
  RL_ASSIGN_OR_RETURN(IndexReply r, peers.units[unit]->Free(orphans));
  *freed += r.done.size();
  spdlog::info("janitor: freed {} rows of unit {} that no row refers to", r.done.size(), unit);
  return Status::OK();
}

}  // namespace

UnitJanitor::UnitJanitor(JanitorOptions options) : options_(std::move(options)) {
  thread_ = std::thread([this] { Loop(); });
}

UnitJanitor::~UnitJanitor() {
  halt_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void UnitJanitor::Release(std::vector<uint64_t> keys) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    released_.insert(released_.end(), keys.begin(), keys.end());
  }
  cv_.notify_all();
}

void UnitJanitor::Loop() {
  Peers peers;
  for (const auto& u : options_.units) peers.units.push_back(std::make_unique<UnitClient>(CallOptions(u, options_.give_up_s, &halt_)));
  peers.controller = std::make_unique<Client>(CallOptions(options_.controller, options_.give_up_s, &halt_));
  int64_t next_pass = MonoMillis() + options_.interval_ms;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return stop_ || !released_.empty(); });
    if (stop_) break;
    std::vector<uint64_t> keys = std::move(released_);
    released_.clear();
    lock.unlock();
    std::vector<uint64_t> left = keys.empty() ? keys : FreeKeys(peers, keys, &freed_);
    if (MonoMillis() >= next_pass) {
      for (uint32_t u = 0; u < peers.units.size(); ++u) {
        uint64_t from = 0;  // page by page, so that old live rows never hide the orphans after them
        do {
          Status s = ReconcilePage(peers, u, options_.grace_ms, &from, &freed_);
          if (!s.ok()) {
            spdlog::warn("janitor: unit {} not reconciled: {}", u, s.ToString());
            break;
          }
        } while (from != 0 && !halt_.load());
      }
      ++passes_;
      next_pass = MonoMillis() + options_.interval_ms;
    }
    lock.lock();
    released_.insert(released_.end(), left.begin(), left.end());
    if (!left.empty()) cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stop_; });  // a unit is down
  }
}

}  // namespace rl::queue
