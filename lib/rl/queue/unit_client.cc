#include "rl/queue/unit_client.h"

namespace rl::queue {

Result<IndexReply> UnitClient::Stage(const PutRequest& req) { return Stage(EncodePut(req), req.rows.size()); }

Result<IndexReply> UnitClient::Stage(Message put, size_t rows) {
  RL_ASSIGN_OR_RETURN(Message reply, client_.Call(Op::kPut, std::move(put.body), std::move(put.blobs)));
  RL_ASSIGN_OR_RETURN(IndexReply r, DecodeIndexReply(reply));
  if (r.done.size() != rows || r.staged_ms == 0) {
    return Status::Protocol("a unit's put reply names " + std::to_string(r.done.size()) + " rows of " +
                            std::to_string(rows) + (r.staged_ms == 0 ? " and no staged_ms" : ""));
  }
  return r;
}

Result<GetReply> UnitClient::Read(const ReadRequest& req) {
  RL_ASSIGN_OR_RETURN(Message reply, client_.Call(kOpRead, EncodeRead(req)));
  return DecodeGetReply(reply);
}

Result<IndexReply> UnitClient::Free(const std::vector<uint64_t>& indices) {
  RL_ASSIGN_OR_RETURN(Message reply, client_.Call(kOpFree, EncodeFree(indices)));
  return DecodeIndexReply(reply);
}

Result<ListReply> UnitClient::List(const ListRequest& req) {
  RL_ASSIGN_OR_RETURN(Message reply, client_.Call(kOpList, EncodeList(req)));
  return DecodeListReply(reply.body);
}

}  // namespace rl::queue
