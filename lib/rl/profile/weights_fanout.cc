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
// a puller of its own; the relay and the trainer are threads of their own too. A fleet serves
// two versions: the figure is the second, as every training step after the first sees it; the
// first (pullers, workers and endpoints set up meanwhile) is printed beside it.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/profile/percentile.h"
#include "rl/profile/weights_profile.h"
#include "rl/weights/cli.h"
#include "rl/weights/puller.h"
#include "rl/weights/source.h"

namespace rl::profile {
namespace {

constexpr int kRolloutPollMs = 20;  // rl-rollout's --weights-poll default (weight_sync.h)

// Waits for a version at least `version` at `sources`, looking every kRolloutPollMs, and pulls it.
Result<weights::Bundle> PollAndPull(weights::Puller* puller, const std::vector<std::string>& sources,
                                    uint64_t version) {
  weights::PullOptions po;
  po.sources = sources;
  po.min_version = version;
  po.request_ms = 2000;
  po.retry_ms = kRolloutPollMs;
  while (true) {
    bool held = false;
    for (const auto& so : puller->Survey(sources, po.request_ms)) held |= so.status.ok() && so.offer.version >= version;
    if (held) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(kRolloutPollMs));
  }
  return puller->Pull(po);
}

// A rollout: pulls and applies (a copy into fresh memory, as decoding into a model does).
Status PullAndApply(weights::Puller* puller, const std::vector<std::string>& sources, uint64_t version) {
  RL_ASSIGN_OR_RETURN(weights::Bundle got, PollAndPull(puller, sources, version));
  std::unique_ptr<char[]> model(new char[got.size()]);
  std::memcpy(model.get(), got.data(), got.size());
  return Status::OK();
}

// The trainer, with relays one relay, and the rollouts: each a thread with a UCX context and a
// puller (or source) of its own, kept from one version to the next as in a training run.
struct Fleet {
  bool relays = false;
  std::unique_ptr<weights::Source> trainer, relay;
  std::unique_ptr<weights::Puller> relay_puller;
  std::vector<std::unique_ptr<weights::Puller>> rollouts;
};

Result<std::unique_ptr<Fleet>> MakeFleet(const std::string& rollout_tls, int n, bool relays) {
  auto f = std::make_unique<Fleet>();
  f->relays = relays;
  RL_ASSIGN_OR_RETURN(auto tctx, weights::UcxContext::Create("tcp"));
  weights::SourceOptions to;
  to.max_pulls = static_cast<uint32_t>(n) + 1;  // nobody is turned away: this measures the copies
  RL_ASSIGN_OR_RETURN(f->trainer, weights::Source::Start(tctx, to));
  RL_ASSIGN_OR_RETURN(auto rctx, weights::UcxContext::Create(rollout_tls));
  RL_ASSIGN_OR_RETURN(f->relay, weights::Source::Start(rctx, to));
  RL_ASSIGN_OR_RETURN(f->relay_puller, weights::Puller::Create(tctx, "fanout-relay"));
  f->rollouts.resize(n);
  for (auto& p : f->rollouts) {
    RL_ASSIGN_OR_RETURN(auto ctx, weights::UcxContext::Create(relays ? rollout_tls : "tcp"));
    RL_ASSIGN_OR_RETURN(p, weights::Puller::Create(ctx, "fanout"));
  }
  return f;
}

// Seconds from the trainer's publish of `b` until every rollout applied it.
Result<double> Update(Fleet* f, const weights::Bundle& b) {
  int n = static_cast<int>(f->rollouts.size());
  std::vector<std::string> sources = {f->relays ? f->relay->endpoint() : f->trainer->endpoint()};
  std::vector<Status> status(n + 1);
  std::vector<std::thread> threads;
  auto t0 = Clock::now();
  if (f->relays) {
    threads.emplace_back([&] {
      auto got = PollAndPull(f->relay_puller.get(), {f->trainer->endpoint()}, b.version);
      status[n] = got.ok() ? f->relay->Publish(*got) : got.status();
    });
  }
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] { status[i] = PullAndApply(f->rollouts[i].get(), sources, b.version); });
  }
  RL_RETURN_IF_ERROR(f->trainer->Publish(b));
  for (auto& t : threads) t.join();
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (const auto& st : status) RL_RETURN_IF_ERROR(st);
  return s;
}

// The update of a second version, after a first (its seconds in *first) set the fleet up.
Result<double> UpdateSeconds(const std::string& rollout_tls, const weights::Bundle& b, int n, bool relays,
                             double* first) {
  RL_ASSIGN_OR_RETURN(std::unique_ptr<Fleet> f, MakeFleet(rollout_tls, n, relays));
  weights::Bundle next = b;
  next.version = b.version + 1;
  RL_ASSIGN_OR_RETURN(*first, Update(f.get(), b));
  return Update(f.get(), next);
}

// Medians over `runs` of the update seconds of n rollouts, each layout in a fleet of its own.
struct FanoutFigures {
  double trainer = 0, relays = 0;              // the second version
  double trainer_first = 0, relays_first = 0;  // the first (fleet set up meanwhile)
};

Result<FanoutFigures> MeasureFanout(const std::string& tls, const weights::Bundle& b, int n, int runs) {
  std::vector<double> direct, relay, direct1, relay1;
  for (int r = 0; r < runs; ++r) {
    double first = 0;
    RL_ASSIGN_OR_RETURN(double d, UpdateSeconds(tls, b, n, false, &first));
    direct.push_back(d);
    direct1.push_back(first);
    RL_ASSIGN_OR_RETURN(double rl, UpdateSeconds(tls, b, n, true, &first));
    relay.push_back(rl);
    relay1.push_back(first);
  }
  return FanoutFigures{Median(&direct), Median(&relay), Median(&direct1), Median(&relay1)};
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
  RL_ASSIGN_OR_RETURN(weights::Bundle b, MakeBundle(1, size, o.chunk_size));
  if (!o.json) {
    out << "\nfan-out of " << size << " bytes (seconds from publish until every rollout applied a version, verified; "
        << "medians; ratio to " << counts.front() << ")\n  trainer: all pull over tcp from the trainer; relays: one relay "
        << "per host pulls over tcp, rollouts map it (" << tls << ")\n  the next version, as every training step; "
        << "first: the first version, while pullers and endpoints are set up\n"
        << "  pullers   trainer  ratio    relays  ratio  trainer-first  relays-first\n";
  }
  FanoutFigures base;
  for (int n : counts) {
    RL_ASSIGN_OR_RETURN(FanoutFigures f, MeasureFanout(tls, b, n, o.runs));
    if (base.trainer == 0) base = f;
    if (o.json) {
      out << nlohmann::json{{"figure", "fanout"},      {"transport", tls},
                            {"bytes", size},           {"pullers", n},
                            {"trainer_s", f.trainer},  {"trainer_ratio", f.trainer / base.trainer},
                            {"relays_s", f.relays},    {"relays_ratio", f.relays / base.relays},
                            {"trainer_first_s", f.trainer_first}, {"relays_first_s", f.relays_first}}.dump()
          << "\n";
    } else {
      char line[160];
      std::snprintf(line, sizeof(line), "  %7d %9.3f %6.2f %9.3f %6.2f %14.3f %13.3f\n", n, f.trainer,
                    f.trainer / base.trainer, f.relays, f.relays / base.relays, f.trainer_first, f.relays_first);
      out << line;
    }
    out.flush();
  }
  return Status::OK();
}

}  // namespace rl::profile
