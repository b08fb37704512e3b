// The RLP1 envelope: the frames of every request and reply (man/rl-protocol.7).
//
//   request:  "RLP1" | header {op, rid, seq, from} | body (msgpack map) | blob frames...
//   reply:    "RLP1" | header {op, rid, seq, status, msg} | body (msgpack map) | blob frames...
//
// rid names a logical request and is the same on every retry; seq numbers every message a sender
// sends, so gaps and duplicates show. Blob frames carry tensors referenced from the body.
// Thread safety: plain values and reentrant functions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rl/core/status.h"

namespace rl {

constexpr char kProtocolId[] = "RLP1";

// Operation codes. The numbers are part of the protocol: never renumber.
enum class Op : uint8_t {
  kPing = 1,
  kPut = 2,
  kGet = 3,
  kAck = 4,
  kNack = 5,
  kStat = 6,
  kMetaGet = 7,
  kMetaSet = 8,
  kDeclare = 9,
};
// The name of any op of the RLP1 protocols (man/rl-protocol.7): the queue's 1-14 (retire, 10, in
// rl/queue/protocol.h; the storage units' 11-14 in rl/queue/unit_protocol.h), health's 32-33,
// weights' 64-67 and rl-env's call, 96; "op17" for a number without a name.
std::string OpName(uint8_t op);

struct Header {
  uint8_t op = 0;
  uint64_t rid = 0;
  uint64_t seq = 0;
  std::string from;     // requests: the sender's id, stable across its reconnects
  uint8_t status = 0;   // replies: a Code
  std::string msg;      // replies: the error message, empty on success
};

struct Message {
  Header header;
  std::string body;                // a msgpack map
  std::vector<std::string> blobs;  // frames after the body
};

// A message read where it arrived: body and blobs view frames that `hold` keeps alive.
struct MessageView {
  Header header;
  std::string_view body;
  std::vector<std::string_view> blobs;
  std::shared_ptr<const void> hold;
};

// Frames of a request or a reply (the routing frame of a ROUTER socket is not included).
std::vector<std::string> EncodeRequest(const Message& m);
std::vector<std::string> EncodeReply(const Message& m);
// The same, taking the body and blobs instead of copying them.
std::vector<std::string> EncodeRequest(Message&& m);
// The header frame of a request alone (a retry changes only its seq).
std::string EncodeRequestHeader(const Header& h);
// The header frame of a reply alone (a server that sends the body frame from its own buffer).
std::string EncodeReplyHeader(const Header& h);
// Decodes frames. Every malformed input is a Protocol status, never a crash.
Result<Message> DecodeRequest(const std::vector<std::string>& frames);
Result<Message> DecodeReply(const std::vector<std::string>& frames);
// The same, taking the frames' bytes instead of copying them.
Result<Message> DecodeRequest(std::vector<std::string>&& frames);
// The first two frames of a request alone (a server that decodes the body where it lies).
Result<Header> DecodeRequestHeader(std::string_view id_frame, std::string_view header_frame);
Result<Message> DecodeReply(std::vector<std::string>&& frames);
// The first two frames of a reply alone (a client that reads the body where it lies).
Result<Header> DecodeReplyHeader(std::string_view id_frame, std::string_view header_frame);

// The empty msgpack map, the body of requests and replies that carry nothing.
const std::string& EmptyBody();

}  // namespace rl
