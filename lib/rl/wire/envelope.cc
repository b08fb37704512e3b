#include "rl/wire/envelope.h"

#include "rl/wire/msgpack_io.h"

namespace rl {
namespace {

std::string PackHeader(const Header& h, bool reply) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(reply ? 5 : 4);
  PackString(pk, "op");
  pk.pack_uint8(h.op);
  PackString(pk, "rid");
  pk.pack_uint64(h.rid);
  PackString(pk, "seq");
  pk.pack_uint64(h.seq);
  if (reply) {
    PackString(pk, "status");
    pk.pack_uint8(h.status);
    PackString(pk, "msg");
    PackString(pk, h.msg);
  } else {
    PackString(pk, "from");
    PackString(pk, h.from);
  }
  return std::string(buf.data(), buf.size());
}

std::vector<std::string> Encode(const Message& m, bool reply) {
  std::vector<std::string> frames;
  frames.reserve(3 + m.blobs.size());
  frames.emplace_back(kProtocolId);
  frames.push_back(PackHeader(m.header, reply));
  frames.push_back(m.body.empty() ? EmptyBody() : m.body);
  for (const auto& b : m.blobs) frames.push_back(b);
  return frames;
}

Result<Header> DecodeHeader(std::string_view id, std::string_view frame, bool reply) {
  if (id != kProtocolId) return Status::Protocol("first frame is not RLP1");
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, ParseMsgpack(frame.data(), frame.size()));
  RL_ASSIGN_OR_RETURN(MapView h, MapView::Of(oh.get(), "header"));
  Header header;
  RL_ASSIGN_OR_RETURN(uint64_t op, h.U64("op"));
  if (op > 255) return Status::Protocol("op out of range");
  header.op = static_cast<uint8_t>(op);
  RL_ASSIGN_OR_RETURN(header.rid, h.U64("rid"));
  RL_ASSIGN_OR_RETURN(header.seq, h.U64("seq", 0));
  if (reply) {
    RL_ASSIGN_OR_RETURN(uint64_t status, h.U64("status"));
    if (status > 255) return Status::Protocol("status out of range");
    header.status = static_cast<uint8_t>(status);
    RL_ASSIGN_OR_RETURN(header.msg, h.Str("msg", ""));
  } else {
    RL_ASSIGN_OR_RETURN(header.from, h.Str("from", ""));
  }
  return header;
}

Result<Message> Decode(std::vector<std::string>&& frames, bool reply) {
  if (frames.size() < 3) return Status::Protocol("a message has " + std::to_string(frames.size()) + " frames, needs 3");
  Message m;
  RL_ASSIGN_OR_RETURN(m.header, DecodeHeader(frames[0], frames[1], reply));
  m.body = std::move(frames[2]);
  m.blobs.assign(std::make_move_iterator(frames.begin() + 3), std::make_move_iterator(frames.end()));
  return m;
}

}  // namespace

std::string OpName(uint8_t op) {
  static const char* queue[] = {"", "ping", "put", "get", "ack", "nack", "stat", "meta_get", "meta_set", "declare",
                                "retire", "read", "free", "list", "held"};
  static const char* weights[] = {"info", "open", "close", "send"};
  if (op >= 1 && op <= 14) return queue[op];
  if (op == 32) return "heartbeat";
  if (op == 33) return "probe";
  if (op >= 64 && op <= 67) return weights[op - 64];
  if (op == 96) return "call";
  return "op" + std::to_string(op);
}

const std::string& EmptyBody() {
  static const std::string empty(1, '\x80');  // msgpack fixmap of size 0
  return empty;
}

std::vector<std::string> EncodeRequest(const Message& m) { return Encode(m, false); }
std::string EncodeRequestHeader(const Header& h) { return PackHeader(h, false); }
std::string EncodeReplyHeader(const Header& h) { return PackHeader(h, true); }
Result<Header> DecodeRequestHeader(std::string_view id_frame, std::string_view header_frame) {
  return DecodeHeader(id_frame, header_frame, false);
}
Result<Header> DecodeReplyHeader(std::string_view id_frame, std::string_view header_frame) {
  return DecodeHeader(id_frame, header_frame, true);
}

std::vector<std::string> EncodeRequest(Message&& m) {
  std::vector<std::string> frames;
  frames.reserve(3 + m.blobs.size());
  frames.emplace_back(kProtocolId);
  frames.push_back(PackHeader(m.header, false));
  frames.push_back(m.body.empty() ? EmptyBody() : std::move(m.body));
  for (auto& b : m.blobs) frames.push_back(std::move(b));
  return frames;
}
std::vector<std::string> EncodeReply(const Message& m) { return Encode(m, true); }
Result<Message> DecodeRequest(const std::vector<std::string>& frames) { return Decode(std::vector<std::string>(frames), false); }
Result<Message> DecodeReply(const std::vector<std::string>& frames) { return Decode(std::vector<std::string>(frames), true); }
Result<Message> DecodeRequest(std::vector<std::string>&& frames) { return Decode(std::move(frames), false); }
Result<Message> DecodeReply(std::vector<std::string>&& frames) { return Decode(std::move(frames), true); }

}  // namespace rl
