#include "rl/env/protocol.h"

#include <cmath>

#include "rl/core/reward_limit.h"
#include "rl/wire/msgpack_io.h"

namespace rl::env {
namespace {

Result<MapView> BodyOf(std::string_view body, msgpack::object_handle* handle, const char* what) {
  RL_ASSIGN_OR_RETURN(*handle, ParseMsgpack(body.data(), body.size()));
  return MapView::Of(handle->get(), what);
}

Result<const msgpack::object_array*> ArrayField(const MapView& v, const char* key) {
  const msgpack::object* o = v.Find(key);
  if (!o) return Status::Protocol(std::string("missing field '") + key + "'");
  if (o->type != msgpack::type::ARRAY) return Status::Protocol(std::string("field '") + key + "' is not an array");
  return &o->via.array;
}

Result<double> AsDouble(const msgpack::object& o, const char* what) {
  if (o.type == msgpack::type::FLOAT64 || o.type == msgpack::type::FLOAT32) return o.via.f64;
  if (o.type == msgpack::type::POSITIVE_INTEGER) return static_cast<double>(o.via.u64);
  if (o.type == msgpack::type::NEGATIVE_INTEGER) return static_cast<double>(o.via.i64);
  return Status::Protocol(std::string(what) + " is not a number");
}

Result<ToolResult> DecodeResult(const msgpack::object& o) {
  RL_ASSIGN_OR_RETURN(MapView v, MapView::Of(o, "result"));
  ToolResult r;
  if (v.Find("output")) {
    RL_ASSIGN_OR_RETURN(r.output, v.Str("output"));
    if (v.Find("error")) return Status::Protocol("a result has both output and error");
    if (const msgpack::object* reward = v.Find("reward")) {
      RL_ASSIGN_OR_RETURN(double x, AsDouble(*reward, "a result's reward"));
      if (!RewardInRange(x)) return Status::Protocol("a result's reward is not finite or above 1e6 in size");
      r.reward = x;
    }
    r.ok = true;
    return r;
  }
  RL_ASSIGN_OR_RETURN(r.error, v.Str("error"));
  RL_ASSIGN_OR_RETURN(r.kind, v.Str("kind"));
  return r;
}

}  // namespace

ToolResult Failed(std::string kind, std::string error) {
  ToolResult r;
  r.kind = std::move(kind);
  r.error = std::move(error);
  return r;
}

std::string EncodeCallRequest(const std::vector<ToolCall>& calls) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(1);
  PackString(pk, "calls");
  pk.pack_array(static_cast<uint32_t>(calls.size()));
  for (const ToolCall& c : calls) {
    pk.pack_map(2);
    PackString(pk, "name");
    PackString(pk, c.name);
    PackString(pk, "arguments");
    PackString(pk, c.arguments);
  }
  return std::string(buf.data(), buf.size());
}

Result<std::vector<ToolCall>> DecodeCallRequest(std::string_view body) {
  msgpack::object_handle h;
  RL_ASSIGN_OR_RETURN(MapView v, BodyOf(body, &h, "call body"));
  RL_ASSIGN_OR_RETURN(const msgpack::object_array* calls, ArrayField(v, "calls"));
  if (calls->size > kMaxCallsPerRequest) {
    return Status::InvalidArgument(std::to_string(calls->size) + " calls in one request; at most " +
                                   std::to_string(kMaxCallsPerRequest));
  }
  std::vector<ToolCall> out;
  out.reserve(calls->size);
  for (uint32_t i = 0; i < calls->size; ++i) {
    RL_ASSIGN_OR_RETURN(MapView c, MapView::Of(calls->ptr[i], "calls[" + std::to_string(i) + "]"));
    ToolCall call;
    RL_ASSIGN_OR_RETURN(call.name, c.Str("name"));
    RL_ASSIGN_OR_RETURN(call.arguments, c.Str("arguments", ""));
    out.push_back(std::move(call));
  }
  return out;
}

std::string EncodeCallReply(const CallReply& reply) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(2);
  PackString(pk, "results");
  pk.pack_array(static_cast<uint32_t>(reply.results.size()));
  for (const ToolResult& r : reply.results) {
    if (r.ok) {
      pk.pack_map(r.reward ? 2 : 1);
      PackString(pk, "output");
      PackString(pk, r.output);
      if (r.reward) {
        PackString(pk, "reward");
        PackFloat64(pk, *r.reward);
      }
    } else {
      pk.pack_map(2);
      PackString(pk, "error");
      PackString(pk, r.error);
      PackString(pk, "kind");
      PackString(pk, r.kind);
    }
  }
  PackString(pk, "seconds");
  PackFloat64(pk, reply.seconds);
  return std::string(buf.data(), buf.size());
}

Result<CallReply> DecodeCallReply(std::string_view body) {
  msgpack::object_handle h;
  RL_ASSIGN_OR_RETURN(MapView v, BodyOf(body, &h, "call reply"));
  RL_ASSIGN_OR_RETURN(const msgpack::object_array* results, ArrayField(v, "results"));
  CallReply reply;
  reply.results.reserve(results->size);
  for (uint32_t i = 0; i < results->size; ++i) {
    RL_ASSIGN_OR_RETURN(ToolResult r, DecodeResult(results->ptr[i]));
    reply.results.push_back(std::move(r));
  }
  if (const msgpack::object* s = v.Find("seconds")) {
    RL_ASSIGN_OR_RETURN(reply.seconds, AsDouble(*s, "seconds"));
  }
  return reply;
}

std::string EncodePingReply(const PingReply& p) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(3);
  PackString(pk, "time_ms");
  pk.pack_int64(p.time_ms);
  PackString(pk, "tools");
  pk.pack_array(static_cast<uint32_t>(p.tools.size()));
  for (const auto& t : p.tools) PackString(pk, t);
  PackString(pk, "workers");
  pk.pack_uint64(p.workers);
  return std::string(buf.data(), buf.size());
}

Result<PingReply> DecodePingReply(std::string_view body) {
  msgpack::object_handle h;
  RL_ASSIGN_OR_RETURN(MapView v, BodyOf(body, &h, "ping reply"));
  PingReply p;
  RL_ASSIGN_OR_RETURN(p.time_ms, v.I64("time_ms", 0));
  if (v.Find("tools")) {
    RL_ASSIGN_OR_RETURN(p.tools, v.StrList("tools"));
  }
  RL_ASSIGN_OR_RETURN(p.workers, v.U64("workers", 0));
  return p;
}

}  // namespace rl::env
