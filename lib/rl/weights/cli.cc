#include "rl/weights/cli.h"

#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "rl/core/clock.h"
#include "rl/core/event_log.h"
#include "rl/core/fail.h"
#include "rl/core/fs.h"
#include "rl/core/log.h"
#include "rl/core/options.h"
#include "rl/core/safetensors_layout.h"
#include "rl/core/signals.h"
#include "rl/weights/relay.h"

namespace rl::weights {
namespace {

constexpr char kTool[] = "rl-relay";

struct Flags {
  std::string log_level = "info", run_dir, id = "0";
  std::string bind = "tcp://127.0.0.1:5600", from, file, out;
  uint32_t max_pulls = 4, chunk_size = kDefaultChunkBytes;
  double poll_s = 0.5, stall_s = 5, timeout_s = 60;
  uint64_t version = 0, wait_version = 0;
};

int RunServe(const Flags& f, const std::atomic<bool>& stop) {
  EventLog events;
  if (!f.run_dir.empty()) {
    if (Status s = events.Open(f.run_dir, "rl-relay", f.id); !s.ok()) return Fail(kTool, s);
  }
  auto ctx = UcxContext::Create();
  if (!ctx.ok()) return Fail(kTool, ctx.status());
  RelayOptions o;
  o.source.bind = f.bind;
  o.source.max_pulls = f.max_pulls;
  o.pull.sources = SplitEndpoints(f.from);
  o.pull.stall_ms = static_cast<int>(f.stall_s * 1000);
  o.pull.give_up_s = 30;
  ApplyTestHooksFromEnv(&o.pull);
  o.poll_ms = static_cast<int>(f.poll_s * 1000);
  o.id = f.id;
  o.events = events.enabled() ? &events : nullptr;
  auto relay = Relay::Start(*ctx, std::move(o));
  if (!relay.ok()) return Fail(kTool, relay.status());
  Status s = (*relay)->Run(stop);
  return s.ok() ? kExitOk : Fail(kTool, s);
}

int RunPublish(const Flags& f, const std::atomic<bool>& stop) {
  uint64_t version = f.version ? f.version : VersionOfWeightsFile(f.file);
  if (version == 0) return Fail(kTool, Status::InvalidArgument("--weights-version is needed: " + f.file + " is not weights-N.safetensors"));
  auto bytes = ReadFile(f.file);
  if (!bytes.ok()) return Fail(kTool, bytes.status());
  // The whole layout, not just the frame Bundle checks: a file no reader takes is refused here,
  // once, rather than by every rollout that pulls it.
  if (auto layout = ReadSafetensorsLayout(*bytes); !layout.ok()) return Fail(kTool, layout.status().WithContext(f.file));
  auto bundle = Bundle::FromString(version, std::move(*bytes), f.chunk_size);
  if (!bundle.ok()) return Fail(kTool, bundle.status().WithContext(f.file));
  auto ctx = UcxContext::Create();
  if (!ctx.ok()) return Fail(kTool, ctx.status());
  SourceOptions o;
  o.bind = f.bind;
  o.max_pulls = f.max_pulls;
  auto source = Source::Start(*ctx, o);
  if (!source.ok()) return Fail(kTool, source.status());
  if (Status s = (*source)->Publish(*bundle); !s.ok()) return Fail(kTool, s);
  spdlog::info("serving {} as version {} ({} bytes, digest {}) on {}", f.file, version, bundle->size(),
               DigestHex(bundle->digest()), (*source)->endpoint());
  while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return kExitOk;
}

int RunPull(const Flags& f, const std::atomic<bool>& stop) {
  auto ctx = UcxContext::Create();
  if (!ctx.ok()) return Fail(kTool, ctx.status());
  auto puller = Puller::Create(*ctx, "rl-relay-pull");
  if (!puller.ok()) return Fail(kTool, puller.status());
  PullOptions o;
  o.sources = SplitEndpoints(f.from);
  o.min_version = f.wait_version;
  o.stall_ms = static_cast<int>(f.stall_s * 1000);
  o.give_up_s = f.timeout_s;
  o.stop = &stop;
  ApplyTestHooksFromEnv(&o);
  PullReport r;
  auto b = (*puller)->Pull(o, &r);
  if (!b.ok()) return Fail(kTool, b.status());
  if (!f.out.empty()) {
    if (Status s = WriteFileAtomic(f.out, std::string(b->data(), b->size())); !s.ok()) return Fail(kTool, s);
  }
  nlohmann::json j = {{"version", b->version}, {"bytes", b->size()},          {"digest", DigestHex(b->digest())},
                      {"source", r.source},    {"seconds", r.seconds},        {"failovers", r.failovers},
                      {"refetched", r.refetched}, {"restarts", r.restarts}};
  std::cout << j.dump() << std::endl;
  return kExitOk;
}

int RunInfo(const Flags& f) {
  auto ctx = UcxContext::Create();
  if (!ctx.ok()) return Fail(kTool, ctx.status());
  auto puller = Puller::Create(*ctx, "rl-relay-info");
  if (!puller.ok()) return Fail(kTool, puller.status());
  int request_ms = static_cast<int>(std::min(f.timeout_s, 60.0) * 1000);
  bool any = false;
  for (const SourceOffer& so : (*puller)->Survey(SplitEndpoints(f.from), request_ms)) {
    nlohmann::json j = {{"source", so.endpoint}};
    if (so.status.ok()) {
      any = true;
      j.update({{"version", so.offer.version}, {"bytes", so.offer.table.size},
                {"digest", DigestHex(so.offer.digest)}, {"active", so.offer.active},
                {"max_pulls", so.offer.max_pulls}});
    } else {
      j["error"] = so.status.message();
    }
    std::cout << j.dump() << std::endl;
  }
  return any ? kExitOk : kExitUnavailable;
}

}  // namespace

int RelayMain(int argc, char** argv) {
  CommandLine cl(kTool, "rl-relay: holds the newest weight version and serves UCX pulls (see man rl-relay)");
  Flags f;
  cl.Bind(nullptr, "--log-level", &f.log_level);

  CLI::App* serve = cl.Sub("serve", "hold the newest weight version of the upstream sources and serve pulls of it");
  cl.Bind(serve, "--weights-bind", &f.bind);
  cl.Require(cl.Bind(serve, "--weights-from", &f.from));
  cl.Bind(serve, "--max-pulls", &f.max_pulls)->check(CLI::Range(1, 1024));
  cl.Bind(serve, "--poll-interval", &f.poll_s)->check(CLI::Range(0.01, 3600.0));
  cl.Bind(serve, "--stall-timeout", &f.stall_s)->check(CLI::Range(0.05, 3600.0));
  cl.Bind(serve, "--run-dir", &f.run_dir);
  cl.Bind(serve, "--id", &f.id);

  CLI::App* publish = cl.Sub("publish", "serve a safetensors file as one weight version (a stand-in for rl-train)");
  cl.Require(cl.Bind(publish, "--file", &f.file));
  cl.Bind(publish, "--weights-version", &f.version);
  cl.Bind(publish, "--weights-bind", &f.bind);
  cl.Bind(publish, "--max-pulls", &f.max_pulls)->check(CLI::Range(1, 1024));
  cl.Bind(publish, "--chunk-size", &f.chunk_size)->check(CLI::Range(kMinChunkBytes, kMaxChunkBytes));

  CLI::App* pull = cl.Sub("pull", "pull the newest weight version any source holds; prints a JSON line");
  cl.Require(cl.Bind(pull, "--weights-from", &f.from));
  cl.Bind(pull, "--out", &f.out);
  cl.Bind(pull, "--wait-version", &f.wait_version);
  cl.Bind(pull, "--stall-timeout", &f.stall_s)->check(CLI::Range(0.05, 3600.0));
  cl.Bind(pull, "--timeout", &f.timeout_s)->check(kPositive);

  CLI::App* info = cl.Sub("info", "what each source holds: one JSON line per source");
  cl.Require(cl.Bind(info, "--weights-from", &f.from));
  cl.Bind(info, "--timeout", &f.timeout_s)->check(kPositive);

  if (auto code = cl.Parse(argc, argv)) return *code;
  if (Status s = InitLogging(kTool, f.log_level); !s.ok()) return Fail(kTool, s);
  const std::atomic<bool>& stop = InstallStopSignals();
  if (serve->parsed()) return RunServe(f, stop);
  if (publish->parsed()) return RunPublish(f, stop);
  if (pull->parsed()) return RunPull(f, stop);
  if (info->parsed()) return RunInfo(f);
  return kExitUsage;
}

void ApplyTestHooksFromEnv(PullOptions* o) {
  const char* corrupt = std::getenv("RL_WEIGHTS_TEST_CORRUPT_CHUNK");
  const char* delay = std::getenv("RL_WEIGHTS_TEST_CHUNK_DELAY_MS");
  if (!corrupt && !delay) return;
  long chunk = corrupt ? std::atol(corrupt) : -1;
  int delay_ms = delay ? std::atoi(delay) : 0;
  // A slow pull must be slow on the wire: asked for one chunk at a time, the source sends the next
  // only after the delay. (With every chunk asked for at once they all land first, and a source
  // killed "mid-pull" has already sent everything.)
  if (delay_ms > 0) o->inflight = 1;
  auto done = std::make_shared<bool>(false);
  o->on_chunk = [chunk, delay_ms, done](size_t i, char* data, size_t n) {
    if (static_cast<long>(i) == chunk && !*done && n > 0) {
      *done = true;
      data[n / 2] ^= 0x10;
      spdlog::warn("test hook: corrupted chunk {}", i);
    }
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  };
}

std::vector<std::string> SplitEndpoints(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

uint64_t VersionOfWeightsFile(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  const std::string prefix = "weights-", suffix = ".safetensors";
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return 0;
  }
  std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stoull(digits);
}

}  // namespace rl::weights
