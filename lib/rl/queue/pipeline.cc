#include "rl/queue/pipeline.h"

namespace rl::queue {

Status QueuePipeline::SubmitPut(const PutRequest& req) {
  Message m;
  if (stager_) {
    RL_ASSIGN_OR_RETURN(m, stager_->StagePut(req));
  } else {
    m = EncodePut(req);
  }
  pipeline_.Submit(Op::kPut, std::move(m.body), std::move(m.blobs));
  return Status::OK();
}

void QueuePipeline::SubmitAck(const std::string& task, uint64_t lease, const std::vector<uint64_t>& indices) {
  pipeline_.Submit(Op::kAck, std::move(EncodeIndices({task, lease, indices, ""}).body));
}

void QueuePipeline::SubmitNack(const std::string& task, uint64_t lease, const std::vector<uint64_t>& indices) {
  pipeline_.Submit(Op::kNack, std::move(EncodeIndices({task, lease, indices, ""}).body));
}

Result<IndexReply> QueuePipeline::Collect() {
  RL_ASSIGN_OR_RETURN(MessageView reply, pipeline_.Collect());
  Message m;
  m.body.assign(reply.body);  // an index reply is small
  return DecodeIndexReply(m);
}

}  // namespace rl::queue
