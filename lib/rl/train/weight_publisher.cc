#include "rl/train/weight_publisher.h"

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/model/model_file.h"

namespace rl::train {

Result<std::unique_ptr<WeightPublisher>> WeightPublisher::Start(const WeightPublisherOptions& options,
                                                                EventLog* events) {
  if (options.bind.empty()) return Status::InvalidArgument("--weights-bind is empty");
  std::unique_ptr<WeightPublisher> p(new WeightPublisher(options, events));
  RL_ASSIGN_OR_RETURN(auto context, weights::UcxContext::Create());
  weights::SourceOptions so;
  so.bind = options.bind;
  so.max_pulls = options.max_pulls;
  RL_ASSIGN_OR_RETURN(p->source_, weights::Source::Start(std::move(context), so));
  p->thread_ = std::thread([q = p.get()] { q->Run(); });
  spdlog::info("serving weight versions on {}", p->source_->endpoint());
  return p;
}

WeightPublisher::~WeightPublisher() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !job_ && !busy_; });
    quit_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WeightPublisher::Offer(uint64_t version, model::Transformer snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  if (job_) spdlog::debug("version {} replaces version {} before it was served", version, job_->version);
  job_ = Job{version, std::move(snapshot)};
  cv_.notify_all();
}

Status WeightPublisher::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !job_ && !busy_; });
  return last_;
}

void WeightPublisher::Run() {
  for (;;) {
    std::optional<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return job_.has_value() || quit_; });
      if (!job_) return;
      job = std::move(job_);
      job_.reset();
      busy_ = true;
    }
    Status s = Serve(*job);
    if (!s.ok()) spdlog::error("serving weights version {}: {}", job->version, s.ToString());
    job.reset();  // the snapshot's tensors go here, off the training thread
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
      last_ = s;
    }
    cv_.notify_all();
  }
}

Status WeightPublisher::Serve(const Job& job) {
  int64_t start = MonoMillis();
  RL_ASSIGN_OR_RETURN(std::string bytes, model::EncodeModel(job.snapshot, job.version));
  int64_t encoded = MonoMillis();
  RL_ASSIGN_OR_RETURN(weights::Bundle bundle,
                      weights::Bundle::FromString(job.version, std::move(bytes), options_.chunk_size));
  if (options_.before_serve) {
    RL_RETURN_IF_ERROR(options_.before_serve(job.version).WithContext("recording the version as served"));
  }
  RL_RETURN_IF_ERROR(source_->Publish(bundle));
  double encode_s = (encoded - start) / 1000.0, total_s = (MonoMillis() - start) / 1000.0;
  spdlog::debug("serving version {} ({} bytes, digest {}) after {:.3f} s", job.version, bundle.size(),
                weights::DigestHex(bundle.digest()), total_s);
  if (events_) {
    events_->Emit("weights-published", {{"version", job.version}, {"bytes", bundle.size()},
                                        {"digest", weights::DigestHex(bundle.digest())},
                                        {"endpoint", source_->endpoint()}, {"encode_s", encode_s},
                                        {"seconds", total_s}});
  }
  return Status::OK();
}

}  // namespace rl::train
