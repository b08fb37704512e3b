// rl-profile weights, fan-out: wall time from the moment the trainer serves a new version until
// every one of N rollouts has applied it, verified, for N = 1 and N = 8 (and whatever --pullers
// names) in the same run, in two layouts:
//   trainer  every rollout pulls from the trainer. The trainer stands for another host: it
//            speaks tcp only, so each rollout receives its own copy through the transport.
//   relays   the layout for many rollouts per host: one relay on the rollouts' host pulls the
//            version from the trainer once (tcp, as across hosts) and serves it as a sealed
//            memfd; the rollouts, polling it every 20 ms as rl-rollout does, map it read-only
//            and check every chunk in place (puller.h). More hosts add relays, not copies.
// "Applied" means Pull returned the verified bundle and the rollout copied it into fresh memory
// of its own, as decoding it into a model does. Each rollout is a thread with a UCX context and
// a puller of its own; the relay and the trainer are threads of their own too.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/profile/weights_profile.h"
#include "rl/weights/cli.h"
#include "rl/weights/puller.h"
#include "rl/weights/source.h"

namespace rl::profile {
namespace {

constexpr int kRolloutPollMs = 20;  // rl-rollout's --weights-poll default (weight_sync.h)

// Waits for a version at least 1 at `sources`, looking every kRolloutPollMs, and pulls it.
Result<weights::Bundle> PollAndPull(weights::Puller* puller, const std::vector<std::string>& sources) {
  weights::PullOptions po;
  po.sources = sources;
  po.min_version = 1;
  po.request_ms = 2000;
  po.retry_ms = kRolloutPollMs;
  while (true) {
    bool held = false;
    for (const auto& so : puller->Survey(sources, po.request_ms)) held |= so.status.ok() && so.offer.version >= 1;
    if (held) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(kRolloutPollMs));
  }
  return puller->Pull(po);
}

// A rollout: pulls and applies (a copy into fresh memory, as decoding into a model does).
Status PullAndApply(weights::Puller* puller, const std::vector<std::string>& sources) {
  RL_ASSIGN_OR_RETURN(weights::Bundle got, PollAndPull(puller, sources));
  std::unique_ptr<char[]> model(new char[got.size()]);
  std::memcpy(model.get(), got.data(), got.size());
  return Status::OK();
}

// Seconds until all n rollouts applied the trainer's version.
Result<double> UpdateSeconds(const std::string& rollout_tls, const weights::Bundle& b, int n, bool relays) {
  RL_ASSIGN_OR_RETURN(auto tctx, weights::UcxContext::Create("tcp"));
  weights::SourceOptions to;
  to.max_pulls = static_cast<uint32_t>(n) + 1;  // nobody is turned away: this measures the copies
  RL_ASSIGN_OR_RETURN(auto trainer, weights::Source::Start(tctx, to));
  RL_ASSIGN_OR_RETURN(auto rctx, weights::UcxContext::Create(rollout_tls));
  weights::SourceOptions ro;
  ro.max_pulls = static_cast<uint32_t>(n) + 1;
  RL_ASSIGN_OR_RETURN(auto relay, weights::Source::Start(rctx, ro));
  RL_ASSIGN_OR_RETURN(auto relay_puller, weights::Puller::Create(tctx, "fanout-relay"));
  std::vector<std::unique_ptr<weights::Puller>> pullers(n);
  for (auto& p : pullers) {
    RL_ASSIGN_OR_RETURN(auto ctx, weights::UcxContext::Create(relays ? rollout_tls : "tcp"));
    RL_ASSIGN_OR_RETURN(p, weights::Puller::Create(ctx, "fanout"));
  }
  std::vector<std::string> sources = {relays ? relay->endpoint() : trainer->endpoint()};
  std::vector<Status> status(n + 1);
  std::vector<std::thread> threads;
  auto t0 = Clock::now();
  if (relays) {
    threads.emplace_back([&] {
      auto got = PollAndPull(relay_puller.get(), {trainer->endpoint()});
      status[n] = got.ok() ? relay->Publish(*got) : got.status();
    });
  }
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] { status[i] = PullAndApply(pullers[i].get(), sources); });
  }
  RL_RETURN_IF_ERROR(trainer->Publish(b));
  for (auto& t : threads) t.join();
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (const auto& st : status) RL_RETURN_IF_ERROR(st);
  return s;
}

}  // namespace

Status RunFanout(const WeightsProfileOptions& o, size_t size, std::ostream& out) {
  std::vector<int> counts;
  for (const auto& c : weights::SplitEndpoints(o.pullers)) {
    RL_ASSIGN_OR_RETURN(size_t n, ParseBytes(c));
    if (n < 1 || n > 64) return Status::InvalidArgument("--pullers counts must be 1 to 64");
    counts.push_back(static_cast<int>(n));
  }
  if (counts.empty()) return Status::OK();
  std::string tls = weights::SplitEndpoints(o.transports).back();
  std::string header = "{\"__metadata__\":{}}  ";
  std::string bytes(size, '\1');
  uint64_t hn = header.size() + 2;
  while ((8 + hn) % 8) hn++;
  header.resize(hn, ' ');
  std::memcpy(bytes.data(), &hn, 8);
  std::memcpy(bytes.data() + 8, header.data(), hn);
  RL_ASSIGN_OR_RETURN(auto b, weights::Bundle::FromString(1, std::move(bytes), o.chunk_size));
  if (!o.json) {
    out << "\nfan-out of " << size << " bytes (seconds from publish until every rollout applied it, verified; ratio to "
        << counts.front() << ")\n  trainer: all pull over tcp from the trainer; relays: one relay per host pulls over tcp,"
        << " rollouts map it (" << tls << ")\n  pullers   trainer  ratio    relays  ratio\n";
  }
  double base_direct = 0, base_relay = 0;
  for (int n : counts) {
    std::vector<double> direct, relay;
    for (int r = 0; r < o.runs; ++r) {
      RL_ASSIGN_OR_RETURN(double d, UpdateSeconds(tls, b, n, false));
      RL_ASSIGN_OR_RETURN(double rl, UpdateSeconds(tls, b, n, true));
      direct.push_back(d);
      relay.push_back(rl);
    }
    std::sort(direct.begin(), direct.end());
    std::sort(relay.begin(), relay.end());
    double d = direct[direct.size() / 2], rl = relay[relay.size() / 2];
    if (base_direct == 0) base_direct = d, base_relay = rl;
    if (o.json) {
      out << nlohmann::json{{"figure", "fanout"}, {"transport", tls}, {"bytes", size}, {"pullers", n},
                            {"trainer_s", d}, {"trainer_ratio", d / base_direct}, {"relays_s", rl},
                            {"relays_ratio", rl / base_relay}}.dump()
          << "\n";
    } else {
      char line[128];
      std::snprintf(line, sizeof(line), "  %7d %9.3f %6.2f %9.3f %6.2f\n", n, d, d / base_direct, rl, rl / base_relay);
      out << line;
    }
    out.flush();
  }
  return Status::OK();
}

}  // namespace rl::profile
