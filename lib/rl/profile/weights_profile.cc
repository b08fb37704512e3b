#include "rl/profile/weights_profile.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <iostream>

#include <nlohmann/json.hpp>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/weights/cli.h"
#include "rl/weights/puller.h"
#include "rl/weights/source.h"

namespace rl::profile {
namespace {

using weights::Bundle;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double Seconds(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

// A safetensors frame around `size` bytes of a cheap pattern.
Result<Bundle> MakeBundle(uint64_t version, size_t size, uint32_t chunk) {
  std::string header = "{\"__metadata__\":{}}";
  while ((8 + header.size()) % 8) header.push_back(' ');
  std::string bytes(std::max(size, header.size() + 16), '\0');
  uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  for (size_t i = 8 + header.size(); i + 8 <= bytes.size(); i += 8) {
    uint64_t v = (i * 0x9E3779B97F4A7C15ULL) ^ version;
    std::memcpy(bytes.data() + i, &v, 8);
  }
  return Bundle::FromString(version, std::move(bytes), chunk);
}

double MemcpyGBps(size_t size, int runs) {
  std::string src(size, 'x'), dst(size, 'y');
  std::vector<double> gbps;
  for (int r = 0; r < runs; ++r) {
    auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), size);
    gbps.push_back(size / Seconds(t0) / 1e9);
  }
  return Median(gbps);
}

// Our pulls of `b` over `tls`, in this process: a source and a puller with contexts of their
// own. Each pull fetches a version published just before it, as in training, where every pull
// is of a version the source has just written. The first pull is a warm-up, as ucx_perftest's
// -w is: the puller sets up its worker, its endpoint and its buffer; its GB/s goes to *first and
// is not counted. `after` runs right after each counted pull (the baseline, back to back with it).
Result<std::vector<double>> PullGBps(const std::string& tls, const Bundle& b, int runs, double* first,
                                     const std::function<void()>& after) {
  RL_ASSIGN_OR_RETURN(auto sctx, weights::UcxContext::Create(tls));
  RL_ASSIGN_OR_RETURN(auto pctx, weights::UcxContext::Create(tls));
  weights::SourceOptions so;
  RL_ASSIGN_OR_RETURN(auto source, weights::Source::Start(sctx, so));
  RL_ASSIGN_OR_RETURN(auto puller, weights::Puller::Create(pctx, "rl-profile"));
  weights::PullOptions po;
  po.sources = {source->endpoint()};
  std::vector<double> gbps;
  for (int r = 0; r <= runs; ++r) {
    Bundle version = b;
    version.version = static_cast<uint64_t>(r) + 1;
    RL_RETURN_IF_ERROR(source->Publish(version));
    po.min_version = version.version;
    weights::PullReport report;
    {
      RL_ASSIGN_OR_RETURN(Bundle got, puller->Pull(po, &report));
      if (got.digest() != b.digest()) return Status::Internal("pulled bundle has another digest");
    }
    double v = b.size() / report.seconds / 1e9;
    if (r == 0) {
      *first = v;
      continue;
    }
    gbps.push_back(v);
    after();
  }
  return gbps;
}

// The operation our pull uses on a transport, as a ucx_perftest test name (puller.h).
std::string PerftestOf(const std::string& tls) { return tls == "tcp" ? "tag_bw" : "ucp_get"; }

}  // namespace

Subcommand AddWeightsProfile(CommandLine& cl, WeightsProfileOptions* o) {
  CLI::App* app = cl.Sub("weights",
                         "weight transfers: GB/s over UCX tcp and shared memory next to ucx_perftest and memcpy in the "
                         "same run; time to update N pullers from the trainer or through relays");
  cl.Bind(app, "--sizes", &o->sizes);
  cl.Bind(app, "--transports", &o->transports);
  cl.Bind(app, "--pullers", &o->pullers);
  cl.Bind(app, "--chunk-size", &o->chunk_size)->check(CLI::Range(weights::kMinChunkBytes, weights::kMaxChunkBytes));
  cl.Bind(app, "--runs", &o->runs)->check(CLI::Range(1, 100));
  cl.BindFlag(app, "--json", &o->json);
  return Subcommand{app, [o] {
                      Status s = RunWeightsProfile(*o, std::cout);
                      if (s.ok()) return 0;
                      std::cerr << "rl-profile: " << s.message() << "\n";
                      return ExitCodeFor(s);
                    }};
}

Status RunFanout(const WeightsProfileOptions& o, size_t size, std::ostream& out);  // weights_fanout.cc

Status RunWeightsProfile(const WeightsProfileOptions& o, std::ostream& out) {
  std::vector<size_t> sizes;
  for (const auto& s : weights::SplitEndpoints(o.sizes)) {
    RL_ASSIGN_OR_RETURN(size_t n, ParseBytes(s));
    sizes.push_back(n);
  }
  std::vector<std::string> transports = weights::SplitEndpoints(o.transports);
  if (sizes.empty() || transports.empty()) return Status::InvalidArgument("--sizes and --transports need values");

  // Which operation: ucx_perftest's put, get and tagged sends at our chunk size.
  if (!o.json) out << "ops at " << o.chunk_size << "-byte messages (ucx_perftest, GB/s)\n  transport       put       get       tag\n";
  for (const auto& tls : transports) {
    double v[3] = {0, 0, 0};
    const char* tests[3] = {"ucp_put_bw", "ucp_get", "tag_bw"};
    for (int i = 0; i < 3; ++i) {
      auto r = PerftestGBps(tls, tests[i], o.chunk_size, 64);
      v[i] = r.ok() ? *r : -1;
      if (!r.ok()) spdlog::warn("ucx_perftest {} over {}: {}", tests[i], tls, r.status().message());
    }
    if (o.json) {
      out << nlohmann::json{{"figure", "ops"}, {"transport", tls}, {"bytes", o.chunk_size}, {"put_gbps", v[0]},
                            {"get_gbps", v[1]}, {"tag_gbps", v[2]}}.dump()
          << "\n";
    } else {
      char line[128];
      std::snprintf(line, sizeof(line), "  %-9s %9.2f %9.2f %9.2f\n", tls.c_str(), v[0], v[1], v[2]);
      out << line;
    }
  }

  if (!o.json) out << "\nbandwidth (GB/s, medians; each pull fetches a version published just before it, after a "
                      "warm-up pull (first); perftest runs the same operation on one message of the bundle's size right "
                      "after each pull; pull/perftest is the median of those pairs' ratios)\n"
                      "  transport      bytes     first      pull  perftest    memcpy  pull/perftest  pull/memcpy\n";
  for (size_t size : sizes) {
    RL_ASSIGN_OR_RETURN(Bundle b, MakeBundle(1, size, o.chunk_size));
    double mem = MemcpyGBps(size, o.runs);
    for (const auto& tls : transports) {
      // Pairs measured back to back: on a shared machine the load moves between runs, and the
      // ratio of a pair is worth more than the ratio of two medians taken minutes apart.
      std::vector<double> perfs, ratios;
      Status perf_status;
      double first = 0;
      RL_ASSIGN_OR_RETURN(std::vector<double> pulls, PullGBps(tls, b, o.runs, &first, [&] {
                            auto perf = PerftestGBps(tls, PerftestOf(tls), size, 1);
                            if (!perf.ok()) perf_status = perf.status();
                            perfs.push_back(perf.ok() ? *perf : 0);
                          }));
      for (size_t i = 0; i < pulls.size(); ++i) {
        if (perfs[i] > 0) ratios.push_back(pulls[i] / perfs[i]);
      }
      if (!perf_status.ok()) spdlog::warn("ucx_perftest over {}: {}", tls, perf_status.message());
      double pull = Median(pulls), p = Median(perfs), ratio = Median(ratios);
      if (o.json) {
        out << nlohmann::json{{"figure", "bandwidth"}, {"transport", tls}, {"bytes", size}, {"first_pull_gbps", first},
                              {"pull_gbps", pull}, {"perftest", PerftestOf(tls)}, {"perftest_gbps", p}, {"memcpy_gbps", mem},
                              {"pull_over_perftest", ratio}, {"pull_over_memcpy", pull / mem}}.dump()
            << "\n";
      } else {
        char line[160];
        std::snprintf(line, sizeof(line), "  %-9s %10zu %9.2f %9.2f %9.2f %9.2f %14.2f %12.2f\n", tls.c_str(), size, first,
                      pull, p, mem, ratio, pull / mem);
        out << line;
      }
      out.flush();
    }
  }
  return RunFanout(o, sizes.size() > 1 ? sizes[1] : sizes[0], out);
}

}  // namespace rl::profile
