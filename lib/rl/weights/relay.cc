#include "rl/weights/relay.h"

#include <thread>

#include "rl/core/clock.h"
#include "rl/core/log.h"

namespace rl::weights {

Result<std::unique_ptr<Relay>> Relay::Start(std::shared_ptr<UcxContext> context, RelayOptions options) {
  if (options.pull.sources.empty()) return Status::InvalidArgument("--weights-from names no upstream source");
  std::unique_ptr<Relay> r(new Relay(std::move(options)));
  r->options_.source.events = r->options_.events;
  RL_ASSIGN_OR_RETURN(r->source_, Source::Start(context, r->options_.source));
  RL_ASSIGN_OR_RETURN(r->puller_, Puller::Create(context, "rl-relay-" + r->options_.id));
  return r;
}

Result<uint64_t> Relay::Step(const std::atomic<bool>& stop) {
  auto held = source_->current();
  uint64_t have = held ? held->version : 0;
  std::vector<SourceOffer> offers = puller_->Survey(options_.pull.sources, options_.pull.request_ms);
  uint64_t newest = 0;
  for (const auto& so : offers) {
    if (so.status.ok()) newest = std::max(newest, so.offer.version);
  }
  if (newest <= have) return have;
  PullOptions o = options_.pull;
  o.min_version = have + 1;
  o.stop = &stop;
  PullReport report;
  RL_ASSIGN_OR_RETURN(Bundle b, puller_->Pull(o, &report));
  RL_RETURN_IF_ERROR(source_->Publish(b));
  double gbps = report.seconds > 0 ? b.size() / report.seconds / 1e9 : 0;
  spdlog::info("holding version {} ({} bytes, digest {}) from {} in {:.3f} s ({:.2f} GB/s{})", b.version, b.size(),
               DigestHex(b.digest()), report.source, report.seconds, gbps,
               report.failovers ? ", " + std::to_string(report.failovers) + " failovers" : "");
  if (options_.events) {
    options_.events->Emit("weights-pulled", {{"version", b.version}, {"bytes", b.size()}, {"from", report.source},
                                             {"seconds", report.seconds}, {"failovers", report.failovers},
                                             {"refetched", report.refetched}});
  }
  return b.version;
}

Status Relay::Run(const std::atomic<bool>& stop) {
  spdlog::info("serving weights on {}; upstream {}", source_->endpoint(), options_.pull.sources.size() == 1
                                                                             ? options_.pull.sources[0]
                                                                             : std::to_string(options_.pull.sources.size()) + " sources");
  if (options_.events) options_.events->EnterPhase("relay");
  while (!stop) {
    auto step = Step(stop);
    if (!step.ok() && !stop) spdlog::warn("{}", step.status().message());
    int64_t until = MonoMillis() + options_.poll_ms;
    while (!stop && MonoMillis() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::OK();
}

}  // namespace rl::weights
