#include "rl/profile/weights_profile.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <iostream>

#include <nlohmann/json.hpp>

#include "rl/core/clock.h"
#include "rl/core/fail.h"
#include "rl/core/log.h"
#include "rl/profile/percentile.h"
#include "rl/weights/cli.h"
#include "rl/weights/puller.h"
#include "rl/weights/source.h"

namespace rl::profile {
namespace {

using weights::Bundle;

double Seconds(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

double MemcpyGBps(size_t size, int runs) {
  std::string src(size, 'x'), dst(size, 'y');
  std::vector<double> gbps;
  for (int r = 0; r < runs; ++r) {
    auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), size);
    gbps.push_back(size / Seconds(t0) / 1e9);
  }
  return Median(&gbps);
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

// The median of the ratios of pairs a[i] / b[i] (pairs whose b is 0, a failed run, are left out).
double MedianRatio(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (b[i] > 0) r.push_back(a[i] / b[i]);
  }
  return Median(&r);
}

// One line of the bandwidth table: our pulls of `b` over `tls`, each followed at once by
// ucx_perftest without and with -e. Pairs measured back to back: on a shared machine the load
// moves between runs, and the ratio of a pair is worth more than that of two distant medians.
Status RunBandwidth(const WeightsProfileOptions& o, const Bundle& b, const std::string& tls, double mem,
                    std::ostream& out) {
  std::vector<double> perfs, perfs_e;
  Status perf_status;
  auto perftest = [&](bool e, std::vector<double>* into) {
    auto perf = PerftestGBps(tls, PerftestOf(tls), b.size(), 1, e);
    if (!perf.ok()) perf_status = perf.status();
    into->push_back(perf.ok() ? *perf : 0);
  };
  double first = 0;
  // UCX 1.13's shared-memory transports have no error mode PEER (ucx.h): -e over tcp only.
  auto context = weights::UcxContext::Create(tls);
  bool with_e = context.ok() && !(*context)->shm_allowed();
  RL_ASSIGN_OR_RETURN(std::vector<double> pulls, PullGBps(tls, b, o.runs, &first, [&] {
                        perftest(false, &perfs);
                        if (with_e) perftest(true, &perfs_e);
                      }));
  if (!perf_status.ok()) spdlog::warn("ucx_perftest over {}: {}", tls, perf_status.message());
  double ratio = MedianRatio(pulls, perfs), ratio_e = MedianRatio(pulls, perfs_e);
  double pull = Median(&pulls), p = Median(&perfs), pe = Median(&perfs_e);  // sorts: after the pairs' ratios
  if (o.json) {
    nlohmann::json j = {{"figure", "bandwidth"},    {"transport", tls},  {"bytes", b.size()},
                        {"first_pull_gbps", first}, {"pull_gbps", pull}, {"perftest", PerftestOf(tls)},
                        {"perftest_gbps", p},       {"memcpy_gbps", mem}, {"pull_over_perftest", ratio},
                        {"pull_over_memcpy", pull / mem}};
    if (with_e) j.update({{"perftest_e_gbps", pe}, {"pull_over_perftest_e", ratio_e}});
    out << j.dump() << "\n";
  } else {
    char e[2][32] = {"-", "-"};
    if (with_e) {
      std::snprintf(e[0], sizeof(e[0]), "%.2f", pe);
      std::snprintf(e[1], sizeof(e[1]), "%.2f", ratio_e);
    }
    char line[192];
    std::snprintf(line, sizeof(line), "  %-9s %10llu %9.2f %9.2f %9.2f %11s %9.2f %14.2f %16s %12.2f\n", tls.c_str(),
                  static_cast<unsigned long long>(b.size()), first, pull, p, e[0], mem, ratio, e[1], pull / mem);
    out << line;
  }
  out.flush();
  return Status::OK();
}

// The ops table: ucx_perftest's put, get and tagged sends at our chunk size, the measurement
// behind the choice of operation (puller.h).
void RunOps(const WeightsProfileOptions& o, const std::vector<std::string>& transports, std::ostream& out) {
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
}

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
                      return s.ok() ? kExitOk : Fail("rl-profile", s);
                    }};
}

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

Status RunFanout(const WeightsProfileOptions& o, size_t size, std::ostream& out);  // weights_fanout.cc

Status RunWeightsProfile(const WeightsProfileOptions& o, std::ostream& out) {
  std::vector<size_t> sizes;
  for (const auto& s : weights::SplitEndpoints(o.sizes)) {
    RL_ASSIGN_OR_RETURN(size_t n, ParseBytes(s));
    sizes.push_back(n);
  }
  std::vector<std::string> transports = weights::SplitEndpoints(o.transports);
  if (sizes.empty() || transports.empty()) return Status::InvalidArgument("--sizes and --transports need values");

  RunOps(o, transports, out);

  if (!o.json) {
    out << "\nbandwidth (GB/s, medians; each pull fetches a version published just before it, after a warm-up pull "
           "(first); perftest runs the same operation on one message of the bundle's size right after each pull, "
           "without and with -e (error mode PEER, as our sources use); the ratios are medians of those pairs' ratios)\n"
           "  transport      bytes     first      pull  perftest  perftest-e    memcpy  pull/perftest  pull/perftest-e  "
           "pull/memcpy\n";
  }
  for (size_t size : sizes) {
    RL_ASSIGN_OR_RETURN(Bundle b, MakeBundle(1, size, o.chunk_size));
    double mem = MemcpyGBps(size, o.runs);
    for (const auto& tls : transports) RL_RETURN_IF_ERROR(RunBandwidth(o, b, tls, mem, out));
  }
  return RunFanout(o, sizes.size() > 1 ? sizes[1] : sizes[0], out);
}

}  // namespace rl::profile
