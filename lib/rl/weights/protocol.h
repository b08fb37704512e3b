// The weight-source protocol: what a puller asks a source (rl-train, rl-relay, rl-rollout) over
// ZeroMQ before it reads the bundle over UCX. It rides in RLP1 envelopes (rl/wire/envelope.h,
// man/rl-protocol.7) with op numbers of its own, 64 and up, so the queue's ops never collide:
//
//   info  (64)  request {}                   reply {version, size, chunk_size, digest, active, max_pulls}
//                                                  blob 0: chunk CRCs (u32 LE each)
//               NotFound while the source holds no version yet.
//   open  (65)  request {version}            reply {version, size, chunk_size, digest, remote_addr,
//                                                   lease, lease_ms}
//                                                  blob 0: chunk CRCs, blob 1: UCX worker address,
//                                                  blob 2: packed remote key of the bundle's memory
//                                                  blob 3: the source's host name
//               shm=1 when the source offers the bundle as a sealed memfd (shared_bytes.h) to
//               pullers on its host (its transports include shared memory); then pid and fd
//               name it: a puller on the same host maps /proc/<pid>/fd/<fd> read-only and
//               checks it in place. Otherwise, or when that fails, it asks for sends.
//               NotFound when the source no longer (or does not yet) hold that version;
//               Unavailable "busy: ..." when max_pulls pulls hold leases: try another source.
//   send  (67)  request {lease, chunks: [i, ...]}  blob 0: the puller's UCX worker address
//                                            reply {} once a tagged send of each chunk is posted,
//               tag = (lease & 0xffffffff) << 32 | i. The puller posts the receives first.
//               NotFound for a lease that is not held; Unavailable when the lease's endpoint failed.
//   close (66)  request {lease, renew}       reply {}
//               renew=true extends the lease by lease_ms; false ends it. NotFound for a lease
//               that already expired (the puller must open again before reading more).
//
// A lease pins the version's memory: the source keeps an old version mapped until its last lease
// ends, so a reader never sees memory reused under it. A puller that stops renewing loses the
// lease after lease_ms and the slot goes to the next puller.
// Thread safety: plain values and reentrant functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/weights/bundle.h"
#include "rl/wire/envelope.h"

namespace rl::weights {

constexpr Op kOpInfo = static_cast<Op>(64);
constexpr Op kOpOpen = static_cast<Op>(65);
constexpr Op kOpClose = static_cast<Op>(66);
constexpr Op kOpSend = static_cast<Op>(67);

inline uint64_t ChunkTag(uint64_t lease, size_t chunk) { return (lease & 0xffffffffULL) << 32 | chunk; }

// What a source offers: one version and its content hash.
struct Offer {
  uint64_t version = 0;
  ChunkTable table;
  uint32_t digest = 0;
  uint32_t active = 0;     // leases held right now
  uint32_t max_pulls = 0;  // leases it grants at once
};

struct OpenGrant {
  Offer offer;
  std::string worker_address;
  std::string rkey;
  uint64_t remote_addr = 0;
  uint64_t lease = 0;
  uint32_t lease_ms = 0;
  std::string host;
  bool shm = false;
  uint32_t pid = 0;  // with shm: the source's process and its memfd descriptor
  uint32_t fd = 0;
};

Message EncodeInfoReply(const Offer& o);
Result<Offer> DecodeInfoReply(const Message& m);

std::string EncodeOpenRequest(uint64_t version);
Result<uint64_t> DecodeOpenRequest(const Message& m);
Message EncodeOpenReply(const OpenGrant& g);
Result<OpenGrant> DecodeOpenReply(const Message& m);

std::string EncodeCloseRequest(uint64_t lease, bool renew);
struct CloseRequest {
  uint64_t lease = 0;
  bool renew = false;
};
Result<CloseRequest> DecodeCloseRequest(const Message& m);

struct SendRequest {
  uint64_t lease = 0;
  std::vector<uint64_t> chunks;
  std::string address;
};
std::vector<std::string> EncodeSendRequest(const SendRequest& r, std::string* body);
Result<SendRequest> DecodeSendRequest(const Message& m);

// This machine's host name (the "host" of an open reply).
std::string HostName();

}  // namespace rl::weights
