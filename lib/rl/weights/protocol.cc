#include "rl/weights/protocol.h"

#include <unistd.h>

#include "rl/wire/msgpack_io.h"

namespace rl::weights {
namespace {

std::string Pack(const std::vector<std::pair<const char*, uint64_t>>& fields) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(static_cast<uint32_t>(fields.size()));
  for (const auto& [k, v] : fields) {
    PackString(pk, k);
    pk.pack_uint64(v);
  }
  return std::string(buf.data(), buf.size());
}

std::vector<std::pair<const char*, uint64_t>> OfferFields(const Offer& o) {
  return {{"version", o.version}, {"size", o.table.size}, {"chunk_size", o.table.chunk_size},
          {"digest", o.digest},   {"active", o.active},    {"max_pulls", o.max_pulls}};
}

// Reads the offer fields of a body and the CRC blob; checks the table against the digest.
Result<Offer> ReadOffer(const MapView& v, const std::string& crc_blob) {
  Offer o;
  RL_ASSIGN_OR_RETURN(o.version, v.U64("version"));
  RL_ASSIGN_OR_RETURN(o.table.size, v.U64("size"));
  RL_ASSIGN_OR_RETURN(uint64_t chunk, v.U64("chunk_size"));
  RL_ASSIGN_OR_RETURN(uint64_t digest, v.U64("digest"));
  RL_ASSIGN_OR_RETURN(uint64_t active, v.U64("active", 0));
  RL_ASSIGN_OR_RETURN(uint64_t max_pulls, v.U64("max_pulls", 0));
  if (chunk > kMaxChunkBytes || digest > UINT32_MAX) return Status::Protocol("chunk_size or digest out of range");
  o.table.chunk_size = static_cast<uint32_t>(chunk);
  o.digest = static_cast<uint32_t>(digest);
  o.active = static_cast<uint32_t>(std::min<uint64_t>(active, UINT32_MAX));
  o.max_pulls = static_cast<uint32_t>(std::min<uint64_t>(max_pulls, UINT32_MAX));
  RL_ASSIGN_OR_RETURN(o.table.crcs, ChunkTable::DecodeCrcs(crc_blob));
  RL_RETURN_IF_ERROR(o.table.Validate());
  if (o.table.Digest() != o.digest) return Status::Protocol("the chunk CRC table does not match the digest");
  return o;
}

Result<MapView> BodyOf(const Message& m, msgpack::object_handle* handle) {
  RL_ASSIGN_OR_RETURN(*handle, ParseMsgpack(m.body.data(), m.body.size()));
  return MapView::Of(handle->get(), "body");
}

}  // namespace

Message EncodeInfoReply(const Offer& o) {
  Message m;
  m.body = Pack(OfferFields(o));
  m.blobs.push_back(o.table.EncodeCrcs());
  return m;
}

Result<Offer> DecodeInfoReply(const Message& m) {
  msgpack::object_handle h;
  RL_ASSIGN_OR_RETURN(MapView v, BodyOf(m, &h));
  if (m.blobs.size() != 1) return Status::Protocol("info reply without its CRC table");
  return ReadOffer(v, m.blobs[0]);
}

std::string EncodeOpenRequest(uint64_t version) { return Pack({{"version", version}}); }

Result<uint64_t> DecodeOpenRequest(const Message& m) {
  msgpack::object_handle h;
  RL_ASSIGN_OR_RETURN(MapView v, BodyOf(m, &h));
  return v.U64("version");
}

Message EncodeOpenReply(const OpenGrant& g) {
  auto fields = OfferFields(g.offer);
  fields.push_back({"remote_addr", g.remote_addr});
  fields.push_back({"lease", g.lease});
  fields.push_back({"lease_ms", g.lease_ms});
  fields.push_back({"shm", g.shm ? 1 : 0});
  if (g.shm) {
    fields.push_back({"pid", g.pid});
    fields.push_back({"fd", g.fd});
  }
  Message m;
  m.body = Pack(fields);
  m.blobs = {g.offer.table.EncodeCrcs(), g.worker_address, g.rkey, g.host};
  return m;
}

Result<OpenGrant> DecodeOpenReply(const Message& m) {
  msgpack::object_handle h;
  RL_ASSIGN_OR_RETURN(MapView v, BodyOf(m, &h));
  if (m.blobs.size() != 4) return Status::Protocol("open reply needs 4 blobs, has " + std::to_string(m.blobs.size()));
  OpenGrant g;
  RL_ASSIGN_OR_RETURN(g.offer, ReadOffer(v, m.blobs[0]));
  g.worker_address = m.blobs[1];
  g.rkey = m.blobs[2];
  g.host = m.blobs[3];
  RL_ASSIGN_OR_RETURN(uint64_t shm, v.U64("shm", 0));
  g.shm = shm != 0;
  RL_ASSIGN_OR_RETURN(uint64_t pid, v.U64("pid", 0));
  RL_ASSIGN_OR_RETURN(uint64_t fd, v.U64("fd", 0));
  if (pid > INT32_MAX || fd > INT32_MAX) return Status::Protocol("pid or fd out of range");
  g.pid = static_cast<uint32_t>(pid);
  g.fd = static_cast<uint32_t>(fd);
  g.shm = g.shm && g.pid != 0;
  if (g.worker_address.empty() || g.rkey.empty()) return Status::Protocol("open reply with an empty address or key");
  RL_ASSIGN_OR_RETURN(g.remote_addr, v.U64("remote_addr"));
  RL_ASSIGN_OR_RETURN(g.lease, v.U64("lease"));
  RL_ASSIGN_OR_RETURN(uint64_t lease_ms, v.U64("lease_ms"));
  g.lease_ms = static_cast<uint32_t>(std::min<uint64_t>(lease_ms, UINT32_MAX));
  return g;
}

std::string EncodeCloseRequest(uint64_t lease, bool renew) { return Pack({{"lease", lease}, {"renew", renew}}); }

Result<CloseRequest> DecodeCloseRequest(const Message& m) {
  msgpack::object_handle h;
  RL_ASSIGN_OR_RETURN(MapView v, BodyOf(m, &h));
  CloseRequest c;
  RL_ASSIGN_OR_RETURN(c.lease, v.U64("lease"));
  RL_ASSIGN_OR_RETURN(uint64_t renew, v.U64("renew", 0));
  c.renew = renew != 0;
  return c;
}

std::vector<std::string> EncodeSendRequest(const SendRequest& r, std::string* body) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(2);
  PackString(pk, "lease");
  pk.pack_uint64(r.lease);
  PackString(pk, "chunks");
  pk.pack_array(static_cast<uint32_t>(r.chunks.size()));
  for (uint64_t c : r.chunks) pk.pack_uint64(c);
  body->assign(buf.data(), buf.size());
  return {r.address};
}

Result<SendRequest> DecodeSendRequest(const Message& m) {
  msgpack::object_handle h;
  RL_ASSIGN_OR_RETURN(MapView v, BodyOf(m, &h));
  if (m.blobs.size() != 1 || m.blobs[0].empty()) return Status::Protocol("send request without the puller's address");
  SendRequest r;
  RL_ASSIGN_OR_RETURN(r.lease, v.U64("lease"));
  RL_ASSIGN_OR_RETURN(r.chunks, v.U64List("chunks"));
  r.address = m.blobs[0];
  return r;
}

std::string HostName() {
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

}  // namespace rl::weights
