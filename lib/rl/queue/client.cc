#include "rl/queue/client.h"

#include "rl/core/log.h"
#include "rl/wire/json_value.h"

namespace rl::queue {

nlohmann::json MsgpackToJson(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::ARRAY: {
      nlohmann::json a = nlohmann::json::array();
      for (uint32_t i = 0; i < o.via.array.size; ++i) a.push_back(MsgpackToJson(o.via.array.ptr[i]));
      return a;
    }
    case msgpack::type::MAP: {
      nlohmann::json m = nlohmann::json::object();
      for (uint32_t i = 0; i < o.via.map.size; ++i) {
        const auto& kv = o.via.map.ptr[i];
        std::string key = kv.key.type == msgpack::type::STR ? std::string(kv.key.via.str.ptr, kv.key.via.str.size)
                                                           : MsgpackToJson(kv.key).dump();
        m[key] = MsgpackToJson(kv.val);
      }
      return m;
    }
    case msgpack::type::POSITIVE_INTEGER: return o.via.u64;
    default: {
      auto v = UnpackValue(o, nullptr);
      return v.ok() ? ValueToJson(*v) : nlohmann::json(nullptr);
    }
  }
}

Result<std::vector<uint64_t>> QueueClient::Put(const PutRequest& req) {
  RL_ASSIGN_OR_RETURN(Message reply, CallPut(req, nullptr));
  RL_ASSIGN_OR_RETURN(IndexReply r, DecodeIndexReply(reply));
  return r.done;
}

Result<std::vector<uint64_t>> QueueClient::PutOnce(uint64_t rid, const PutRequest& req) {
  RL_ASSIGN_OR_RETURN(Message reply, CallPut(req, &rid));
  RL_ASSIGN_OR_RETURN(IndexReply r, DecodeIndexReply(reply));
  return r.done;
}

// The body is packed into the buffer of the last put when the socket has let go of it: a producer
// putting megabytes at a time reuses one allocation instead of faulting in a fresh one each time.
Result<std::vector<uint64_t>> QueueClient::PutColumn(std::string_view column, const std::vector<std::string>& values) {
  RL_ASSIGN_OR_RETURN(std::vector<std::string> units, Units());
  if (!units.empty()) {  // the values go to the units: a put like any other
    PutRequest req;
    for (const auto& v : values) req.rows.push_back({std::nullopt, {{std::string(column), Bytes{v}}}});
    return Put(req);
  }
  if (!put_body_ || put_body_.use_count() > 1) put_body_ = std::make_shared<std::string>();
  EncodePutColumnInto(put_body_.get(), column, values);
  RL_ASSIGN_OR_RETURN(Message reply, client_.CallShared(Op::kPut, put_body_));
  RL_ASSIGN_OR_RETURN(IndexReply r, DecodeIndexReply(reply));
  return r.done;
}

namespace {

Result<int64_t> UpdateDeadline(Result<Message> reply) {
  if (!reply.ok()) return reply.status();
  RL_ASSIGN_OR_RETURN(IndexReply r, DecodeIndexReply(*reply));
  return r.deadline_ms;
}

}  // namespace

Result<int64_t> QueueClient::Update(const PutRequest& req) {
  if (req.update_task.empty()) return Status::InvalidArgument("an update names the task whose lease holds its rows");
  return UpdateDeadline(CallPut(req, nullptr));
}

Result<int64_t> QueueClient::UpdateOnce(uint64_t rid, const PutRequest& req) {
  if (req.update_task.empty()) return Status::InvalidArgument("an update names the task whose lease holds its rows");
  return UpdateDeadline(CallPut(req, &rid));
}

Result<GetReply> QueueClient::Get(const GetRequest& req) {
  for (int attempt = 1;; ++attempt) {
    Message m = EncodeGet(req);
    RL_ASSIGN_OR_RETURN(Message reply, client_.Call(Op::kGet, std::move(m.body), {}, req.wait_ms));
    MessageView view{reply.header, reply.body, {reply.blobs.begin(), reply.blobs.end()}, nullptr};
    Result<std::optional<Message>> resolved = ResolveRefs(view);
    if (resolved.ok()) return DecodeGetReply(*resolved ? **resolved : reply);
    RL_RETURN_IF_ERROR(RetryAfterFreed(req.task, view, resolved.status(), attempt));
  }
}

Result<GetReplyView> QueueClient::GetView(const GetRequest& req) {
  for (int attempt = 1;; ++attempt) {
    Message m = EncodeGet(req);
    RL_ASSIGN_OR_RETURN(MessageView reply, client_.CallView(Op::kGet, std::move(m.body), {}, req.wait_ms));
    Result<std::optional<Message>> resolved = ResolveRefs(reply);
    if (!resolved.ok()) {
      RL_RETURN_IF_ERROR(RetryAfterFreed(req.task, reply, resolved.status(), attempt));
      continue;
    }
    if (*resolved) return DecodeGetReplyView(std::move(**resolved));
    return DecodeGetReplyView(std::move(reply));
  }
}

Result<IndexReply> QueueClient::Ack(const std::string& task, uint64_t lease, const std::vector<uint64_t>& indices) {
  Message m = EncodeIndices({task, lease, indices, ""});
  RL_ASSIGN_OR_RETURN(Message reply, client_.Call(Op::kAck, std::move(m.body)));
  return DecodeIndexReply(reply);
}

Result<IndexReply> QueueClient::Nack(const std::string& task, uint64_t lease, const std::vector<uint64_t>& indices) {
  Message m = EncodeIndices({task, lease, indices, ""});
  RL_ASSIGN_OR_RETURN(Message reply, client_.Call(Op::kNack, std::move(m.body)));
  return DecodeIndexReply(reply);
}

Result<IndexReply> QueueClient::ReleaseHolder(const std::string& task, const std::string& holder) {
  IndexRequest r;
  r.task = task;
  r.holder = holder;
  RL_ASSIGN_OR_RETURN(Message reply, client_.Call(Op::kNack, EncodeIndices(r).body));
  return DecodeIndexReply(reply);
}

Result<std::optional<std::string>> QueueClient::MetaGet(const std::string& key) {
  RL_ASSIGN_OR_RETURN(Message reply, client_.Call(Op::kMetaGet, EncodeMetaGet(key).body));
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, ParseMsgpack(reply.body.data(), reply.body.size()));
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(oh.get(), "meta reply"));
  const msgpack::object* v = b.Find("value");
  if (v == nullptr || v->type == msgpack::type::NIL) return std::optional<std::string>();
  RL_ASSIGN_OR_RETURN(std::string s, AsString(*v, "meta value"));
  return std::optional<std::string>(std::move(s));
}

Status QueueClient::MetaSet(const MetaRequest& req) {
  return client_.Call(Op::kMetaSet, EncodeMetaSet(req).body).status();
}

Status QueueClient::Declare(const std::string& task, const std::vector<std::string>& columns, bool optional) {
  return client_.Call(Op::kDeclare, EncodeDeclare({task, columns, optional}).body).status();
}

Result<uint64_t> QueueClient::Retire(const std::string& task) {
  RL_ASSIGN_OR_RETURN(Message reply, client_.Call(kOpRetire, EncodeRetire(task).body));
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, ParseMsgpack(reply.body.data(), reply.body.size()));
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(oh.get(), "retire reply"));
  return b.U64("freed", 0);
}

Result<nlohmann::json> QueueClient::Stat() {
  RL_ASSIGN_OR_RETURN(Message reply, client_.Call(Op::kStat, EmptyBody()));
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, ParseMsgpack(reply.body.data(), reply.body.size()));
  return MsgpackToJson(oh.get());
}

Status QueueClient::Ping() { return client_.Call(Op::kPing, EmptyBody()).status(); }

Status ReleaseEarlierLeases(QueueClient& client, const std::string& task, const std::string& holder, EventLog* events) {
  if (holder.empty()) return Status::OK();
  auto r = client.ReleaseHolder(task, holder);
  if (!r.ok()) return r.status().code() == Code::kNotFound ? Status::OK() : r.status();
  if (r->done.empty()) return Status::OK();
  spdlog::info("gave back {} rows of task '{}' an earlier {} had leased", r->done.size(), task, holder);
  if (events) events->Emit("released", {{"task", task}, {"rows", r->done.size()}, {"holder", holder}});
  return Status::OK();
}

}  // namespace rl::queue
