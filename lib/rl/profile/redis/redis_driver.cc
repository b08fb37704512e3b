#include "rl/profile/redis/redis_driver.h"

#include <hiredis/hiredis.h>

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace rl::profile {
namespace {

constexpr char kStream[] = "rl-profile";
constexpr char kGroup[] = "bench";
constexpr int kCommandTimeoutS = 30;  // above any BLOCK the workload asks for

struct FreeReply {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, FreeReply>;

class RedisDriver : public QueueDriver {
 public:
  RedisDriver(redisContext* c, std::string consumer) : c_(c), consumer_(std::move(consumer)) {}
  ~RedisDriver() override { redisFree(c_); }

  Status Prepare() override {
    RL_ASSIGN_OR_RETURN(Reply del, Command({"DEL", kStream}));
    RL_ASSIGN_OR_RETURN(Reply group, Command({"XGROUP", "CREATE", kStream, kGroup, "$", "MKSTREAM"}));
    return Expect(group.get(), REDIS_REPLY_STATUS, "XGROUP CREATE");
  }

  Status Put(const std::vector<std::string>& payloads) override {
    for (const auto& p : payloads) {
      if (redisAppendCommand(c_, "XADD %s * payload %b", kStream, p.data(), p.size()) != REDIS_OK) return Broken();
    }
    for (size_t i = 0; i < payloads.size(); ++i) {
      RL_ASSIGN_OR_RETURN(Reply r, Next());
      RL_RETURN_IF_ERROR(Expect(r.get(), REDIS_REPLY_STRING, "XADD"));
    }
    return Status::OK();
  }

  Status Get(size_t max, int wait_ms, Taken* out) override {
    out->Clear();
    std::vector<std::string> args = {"XREADGROUP", "GROUP", kGroup, consumer_, "COUNT", std::to_string(max)};
    if (wait_ms > 0) args.insert(args.end(), {"BLOCK", std::to_string(wait_ms)});
    args.insert(args.end(), {"STREAMS", kStream, ">"});
    RL_ASSIGN_OR_RETURN(Reply r, Command(args));
    if (r->type == REDIS_REPLY_NIL) return Status::OK();  // nothing within BLOCK
    RL_RETURN_IF_ERROR(Expect(r.get(), REDIS_REPLY_ARRAY, "XREADGROUP"));
    for (size_t s = 0; s < r->elements; ++s) {
      const redisReply* stream = r->element[s];
      if (stream->type != REDIS_REPLY_ARRAY || stream->elements != 2) return Status::Protocol("XREADGROUP: odd reply");
      const redisReply* entries = stream->element[1];
      for (size_t e = 0; entries->type == REDIS_REPLY_ARRAY && e < entries->elements; ++e) {
        RL_RETURN_IF_ERROR(TakeEntry(entries->element[e], out));
      }
    }
    return Status::OK();
  }

  Status Ack(const Taken& taken) override {
    RL_RETURN_IF_ERROR(AppendXack(taken));
    return CheckXack(taken);
  }

  // A sliding window of XACKs: up to `window` appended before the oldest's reply is read. (hiredis
  // writes what was appended when a reply is wanted and none is buffered yet.)
  Status AckPipelined(const std::vector<Taken>& taken, int window, std::vector<double>* latency_us) override {
    std::deque<std::chrono::steady_clock::time_point> sent;
    size_t next = 0;
    for (const Taken& t : taken) {
      if (sent.size() >= static_cast<size_t>(window)) RL_RETURN_IF_ERROR(ReadXack(taken[next++], &sent, latency_us));
      sent.push_back(std::chrono::steady_clock::now());
      RL_RETURN_IF_ERROR(AppendXack(t));
    }
    while (!sent.empty()) RL_RETURN_IF_ERROR(ReadXack(taken[next++], &sent, latency_us));
    return Status::OK();
  }

 private:
  Status AppendXack(const Taken& taken) {
    std::vector<const char*> argv = {"XACK", kStream, kGroup};
    std::vector<size_t> lens = {4, sizeof(kStream) - 1, sizeof(kGroup) - 1};
    for (const auto& id : taken.ids) {
      argv.push_back(id.data());
      lens.push_back(id.size());
    }
    int argc = static_cast<int>(argv.size());
    if (redisAppendCommandArgv(c_, argc, argv.data(), lens.data()) != REDIS_OK) return Broken();
    return Status::OK();
  }

  Status CheckXack(const Taken& taken) {
    RL_ASSIGN_OR_RETURN(Reply r, Next());
    RL_RETURN_IF_ERROR(Expect(r.get(), REDIS_REPLY_INTEGER, "XACK"));
    if (static_cast<size_t>(r->integer) != taken.ids.size()) {
      return Status::Conflict("XACK of " + std::to_string(taken.ids.size()) + " entries acked " +
                              std::to_string(r->integer));
    }
    return Status::OK();
  }

  Status ReadXack(const Taken& taken, std::deque<std::chrono::steady_clock::time_point>* sent,
                  std::vector<double>* latency_us) {
    RL_RETURN_IF_ERROR(CheckXack(taken));
    latency_us->push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - sent->front()).count());
    sent->pop_front();
    return Status::OK();
  }

  // An entry is [id, [field, value, ...]].
  static Status TakeEntry(const redisReply* entry, Taken* out) {
    if (entry->type != REDIS_REPLY_ARRAY || entry->elements != 2 || entry->element[0]->type != REDIS_REPLY_STRING) {
      return Status::Protocol("XREADGROUP: odd entry");
    }
    out->ids.emplace_back(entry->element[0]->str, entry->element[0]->len);
    const redisReply* fields = entry->element[1];
    int64_t stamp = 0;
    for (size_t f = 0; fields->type == REDIS_REPLY_ARRAY && f + 1 < fields->elements; f += 2) {
      if (std::string(fields->element[f]->str, fields->element[f]->len) == "payload") {
        stamp = PayloadStamp(fields->element[f + 1]->str, fields->element[f + 1]->len);
      }
    }
    out->stamps_ns.push_back(stamp);
    return Status::OK();
  }

  Result<Reply> Command(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(c_, static_cast<int>(args.size()), argv.data(), lens.data()) != REDIS_OK) return Broken();
    return Next();
  }

  Result<Reply> Next() {
    void* raw = nullptr;
    if (redisGetReply(c_, &raw) != REDIS_OK || raw == nullptr) return Broken();
    return Reply(static_cast<redisReply*>(raw));
  }

  Status Broken() const { return Status::Unavailable(std::string("redis: ") + (c_->err ? c_->errstr : "no reply")); }

  static Status Expect(const redisReply* r, int type, const char* what) {
    if (r->type == type) return Status::OK();
    if (r->type == REDIS_REPLY_ERROR) return Status::Internal(std::string(what) + ": " + std::string(r->str, r->len));
    return Status::Protocol(std::string(what) + ": unexpected reply type " + std::to_string(r->type));
  }

  redisContext* c_;
  std::string consumer_;
};

}  // namespace

DriverFactory RedisDrivers(int port) {
  return [port](int client) -> Result<std::unique_ptr<QueueDriver>> {
    timeval connect_timeout{2, 0};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port, connect_timeout);
    if (c == nullptr || c->err) {
      std::string why = c ? c->errstr : "out of memory";
      if (c) redisFree(c);
      return Status::Unavailable("redis 127.0.0.1:" + std::to_string(port) + ": " + why);
    }
    timeval command_timeout{kCommandTimeoutS, 0};
    redisSetTimeout(c, command_timeout);
    return std::unique_ptr<QueueDriver>(new RedisDriver(c, "consumer-" + std::to_string(client)));
  };
}

}  // namespace rl::profile
