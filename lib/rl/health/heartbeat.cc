#include "rl/health/heartbeat.h"

#include "rl/wire/envelope.h"
#include "rl/wire/msgpack_io.h"

namespace rl::health {
namespace {

Result<double> F64(const MapView& m, std::string_view key, double fallback) {
  const msgpack::object* o = m.Find(key);
  if (o == nullptr) return fallback;
  switch (o->type) {
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return o->via.f64;
    case msgpack::type::POSITIVE_INTEGER: return static_cast<double>(o->via.u64);
    case msgpack::type::NEGATIVE_INTEGER: return static_cast<double>(o->via.i64);
    default: return Status::Protocol(std::string(key) + " is not a number");
  }
}

Status DecodeCounters(const msgpack::object& o, std::map<std::string, uint64_t>* out) {
  RL_ASSIGN_OR_RETURN(MapView m, MapView::Of(o, "counters"));
  for (const auto& kv : m) {
    RL_ASSIGN_OR_RETURN(std::string name, AsString(kv.key, "counter name"));
    RL_ASSIGN_OR_RETURN((*out)[name], AsU64(kv.val, "counter " + name));
  }
  return Status::OK();
}

Status DecodeEndpoints(const msgpack::object& o, std::map<std::string, std::string>* out) {
  RL_ASSIGN_OR_RETURN(MapView m, MapView::Of(o, "endpoints"));
  for (const auto& kv : m) {
    RL_ASSIGN_OR_RETURN(std::string name, AsString(kv.key, "endpoint name"));
    RL_ASSIGN_OR_RETURN((*out)[name], AsString(kv.val, "endpoint " + name));
  }
  return Status::OK();
}

std::string PackBody(const Heartbeat& hb) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(15);
  PackString(pk, "role"), PackString(pk, hb.role);
  PackString(pk, "id"), PackString(pk, hb.id);
  PackString(pk, "pid"), pk.pack_uint64(hb.pid);
  PackString(pk, "host"), PackString(pk, hb.host);
  PackString(pk, "phase"), PackString(pk, hb.phase);
  PackString(pk, "step"), pk.pack_int64(hb.step);
  PackString(pk, "version"), pk.pack_int64(hb.version);
  PackString(pk, "interval_ms"), pk.pack_uint64(hb.interval_ms);
  PackString(pk, "started_ms"), pk.pack_int64(hb.started_ms);
  PackString(pk, "sent_ms"), pk.pack_int64(hb.sent_ms);
  PackString(pk, "cpu_busy"), PackFloat64(pk, hb.cpu_busy);
  PackString(pk, "leaving"), hb.leaving ? pk.pack_true() : pk.pack_false();
  PackString(pk, "counters"), pk.pack_map(static_cast<uint32_t>(hb.counters.size()));
  for (const auto& [k, v] : hb.counters) PackString(pk, k), pk.pack_uint64(v);
  PackString(pk, "endpoints"), pk.pack_map(static_cast<uint32_t>(hb.endpoints.size()));
  for (const auto& [k, v] : hb.endpoints) PackString(pk, k), PackString(pk, v);
  PackString(pk, "proto"), pk.pack_uint8(1);  // body version: fields are only ever added
  return std::string(buf.data(), buf.size());
}

}  // namespace

uint64_t Heartbeat::ProgressSum() const {
  uint64_t sum = 0;
  for (const auto& [name, v] : counters) sum += v;
  return sum;
}

std::vector<std::string> EncodeHeartbeat(const Heartbeat& hb) {
  Message m;
  m.header.op = kOpHeartbeat;
  m.header.rid = hb.probe_rid;
  m.header.seq = hb.seq;
  m.header.from = hb.Key();
  m.body = PackBody(hb);
  return EncodeRequest(std::move(m));
}

Result<Heartbeat> DecodeHeartbeat(const std::vector<std::string>& frames) {
  RL_ASSIGN_OR_RETURN(Message m, DecodeRequest(frames));
  if (m.header.op != kOpHeartbeat) return Status::Protocol("not a heartbeat: op " + OpName(m.header.op));
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, ParseMsgpack(m.body.data(), m.body.size()));
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(oh.get(), "heartbeat"));
  Heartbeat hb;
  hb.seq = m.header.seq;
  hb.probe_rid = m.header.rid;
  RL_ASSIGN_OR_RETURN(hb.role, b.Str("role"));
  RL_ASSIGN_OR_RETURN(hb.id, b.Str("id"));
  RL_ASSIGN_OR_RETURN(hb.pid, b.U64("pid", 0));
  RL_ASSIGN_OR_RETURN(hb.host, b.Str("host", ""));
  RL_ASSIGN_OR_RETURN(hb.phase, b.Str("phase", ""));
  RL_ASSIGN_OR_RETURN(hb.step, b.I64("step", 0));
  RL_ASSIGN_OR_RETURN(hb.version, b.I64("version", -1));
  RL_ASSIGN_OR_RETURN(hb.interval_ms, b.U64("interval_ms", 1000));
  RL_ASSIGN_OR_RETURN(hb.started_ms, b.I64("started_ms", 0));
  RL_ASSIGN_OR_RETURN(hb.sent_ms, b.I64("sent_ms", 0));
  RL_ASSIGN_OR_RETURN(hb.cpu_busy, F64(b, "cpu_busy", -1));
  RL_ASSIGN_OR_RETURN(hb.leaving, b.Bool("leaving", false));
  if (const msgpack::object* c = b.Find("counters")) RL_RETURN_IF_ERROR(DecodeCounters(*c, &hb.counters));
  if (const msgpack::object* e = b.Find("endpoints")) RL_RETURN_IF_ERROR(DecodeEndpoints(*e, &hb.endpoints));
  if (hb.interval_ms == 0 || hb.interval_ms > 3600000) return Status::Protocol("heartbeat interval_ms out of range");
  return hb;
}

std::vector<std::string> EncodeProbe(uint64_t rid, int64_t window_ms) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(1);
  PackString(pk, "window_ms");
  pk.pack_int64(window_ms);
  Message m;
  m.header.op = kOpProbe;
  m.header.rid = rid;
  m.header.seq = rid;
  m.header.from = "rl-watchdog";
  m.body.assign(buf.data(), buf.size());
  return EncodeRequest(std::move(m));
}

Result<Probe> DecodeProbe(const std::vector<std::string>& frames) {
  RL_ASSIGN_OR_RETURN(Message m, DecodeRequest(frames));
  if (m.header.op != kOpProbe) return Status::Protocol("not a probe: op " + OpName(m.header.op));
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, ParseMsgpack(m.body.data(), m.body.size()));
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(oh.get(), "probe"));
  Probe p;
  p.rid = m.header.rid;
  RL_ASSIGN_OR_RETURN(p.window_ms, b.I64("window_ms", 1000));
  if (p.rid == 0) return Status::Protocol("a probe needs a non-zero rid");
  if (p.window_ms < 0 || p.window_ms > 60000) return Status::Protocol("probe window_ms out of range");
  return p;
}

}  // namespace rl::health
