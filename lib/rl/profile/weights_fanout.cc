// rl-profile weights, fan-out: seconds to bring N pullers (rollouts) to a new version, all
// pulling from the trainer against every puller serving what it has (relays), in one process:
// each puller is a thread with a UCX context, a puller and a source of its own.
#include <algorithm>
#include <atomic>
#include <cstring>
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

struct Node {
  std::unique_ptr<weights::Source> source;
  std::unique_ptr<weights::Puller> puller;
  Status status;
};

// Seconds until all n pullers hold the trainer's version.
Result<double> UpdateSeconds(const std::string& tls, const weights::Bundle& b, int n, bool relays) {
  RL_ASSIGN_OR_RETURN(auto tctx, weights::UcxContext::Create(tls));
  weights::SourceOptions to;
  to.max_pulls = relays ? 2 : static_cast<uint32_t>(n);  // alone, the trainer serves everyone at once
  RL_ASSIGN_OR_RETURN(auto trainer, weights::Source::Start(tctx, to));
  RL_RETURN_IF_ERROR(trainer->Publish(b));
  std::vector<Node> nodes(n);
  std::vector<std::string> sources = {trainer->endpoint()};
  for (auto& node : nodes) {
    RL_ASSIGN_OR_RETURN(auto ctx, weights::UcxContext::Create(tls));
    weights::SourceOptions so;
    so.max_pulls = 2;
    RL_ASSIGN_OR_RETURN(node.source, weights::Source::Start(ctx, so));
    RL_ASSIGN_OR_RETURN(node.puller, weights::Puller::Create(ctx, "fanout"));
    if (relays) sources.push_back(node.source->endpoint());
  }
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (auto& node : nodes) {
    threads.emplace_back([&node, &go, &sources, relays] {
      while (!go) std::this_thread::yield();
      weights::PullOptions po;
      po.sources = sources;
      po.retry_ms = 2;
      po.request_ms = 2000;
      auto got = node.puller->Pull(po);
      node.status = got.status();
      if (got.ok() && relays) node.status = node.source->Publish(*got);
    });
  }
  auto t0 = Clock::now();
  go = true;
  for (auto& t : threads) t.join();
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (const auto& node : nodes) RL_RETURN_IF_ERROR(node.status);
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
    out << "\nfan-out of " << size << " bytes over " << tls
        << " (seconds until every puller has it; ratio to 1 puller)\n  pullers   trainer  ratio    relays  ratio\n";
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
