#include "rl/rollout/weight_sync.h"

#include <algorithm>
#include <string_view>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/health/progress.h"
#include "rl/model/model_file.h"
#include "rl/weights/cli.h"

namespace rl::rollout {
namespace {

constexpr int kRequestMs = 1000;       // one info request before a source counts as silent
constexpr double kMaxPullSeconds = 30;  // one pull; then the sources are looked at afresh

// What the sources hold: answered is true when any replied (holding a version or not yet).
struct Survey {
  bool answered = false;
  int64_t newest = -1;
  Status last = Status::Unavailable("no weight source configured");
};

Survey Look(weights::Puller* puller, const std::vector<std::string>& sources) {
  Survey s;
  for (const weights::SourceOffer& so : puller->Survey(sources, kRequestMs)) {
    if (so.status.ok()) {
      s.answered = true;
      s.newest = std::max(s.newest, static_cast<int64_t>(so.offer.version));
    } else if (so.status.code() == Code::kNotFound) {
      s.answered = true;  // up, holding no version yet
    } else {
      s.last = so.status.WithContext(so.endpoint);
    }
  }
  return s;
}

}  // namespace

Result<std::unique_ptr<WeightSync>> WeightSync::Start(WeightSyncOptions options, std::optional<uint64_t> held) {
  if (options.sources.empty()) return Status::InvalidArgument("--weights-from names no weight source");
  std::unique_ptr<WeightSync> w(new WeightSync(std::move(options)));
  if (held) w->current_ = static_cast<int64_t>(*held);
  weights::ApplyTestHooksFromEnv(&w->pull_);
  auto context = weights::UcxContext::Create();
  Status ucx = context.status();
  if (context.ok()) {
    w->context_ = *context;
    auto puller = weights::Puller::Create(w->context_, "rl-rollout-" + w->options_.id);
    ucx = puller.status();
    if (puller.ok()) w->puller_ = std::move(*puller);
  }
  if (!w->options_.bind.empty()) {
    if (!ucx.ok()) return ucx.WithContext("cannot serve weights on " + w->options_.bind);
    weights::SourceOptions so;
    so.bind = w->options_.bind;
    so.max_pulls = w->options_.max_pulls;
    so.events = w->options_.events;
    RL_ASSIGN_OR_RETURN(w->relay_, weights::Source::Start(w->context_, so));
    spdlog::info("serving the weight versions we pull on {}", w->relay_->endpoint());
  }
  w->last_ok_ms_ = MonoMillis();
  if (!ucx.ok()) w->Failed("ucx", ucx.WithContext("UCX cannot be set up"), true);
  w->thread_ = std::thread([p = w.get()] { p->Run(); });
  return w;
}

WeightSync::~WeightSync() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool WeightSync::Stopping() const {
  return stop_.load() || (options_.process_stop && options_.process_stop->load());
}

void WeightSync::Run() {
  while (!Stopping() && puller_) {
    std::string cause;
    Status s = Step(&cause);
    if (Stopping()) break;  // a pull cut short by the stop is no failure to warn about
    if (s.ok()) {
      Succeeded();
    } else {
      Failed(cause, s, false);
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(options_.poll_ms), [this] { return Stopping(); });
  }
}

Status WeightSync::Step(std::string* cause) {
  Survey look = Look(puller_.get(), options_.sources);
  if (!look.answered) {
    *cause = "unreachable";
    return Status::Unavailable("no weight source answered (" + look.last.message() + ")");
  }
  int64_t have = std::max(pulled_, current_.load());
  if (look.newest <= have || (bad_version_ && static_cast<int64_t>(*bad_version_) == look.newest)) {
    return Status::OK();
  }
  Status s = Pull(static_cast<uint64_t>(have + 1));
  if (s.ok() || Stopping()) return Status::OK();
  // The version may have gone with the only source that held it (a trainer killed while being
  // pulled): that is no failure of UCX as long as the sources answer with nothing newer.
  Survey after = Look(puller_.get(), options_.sources);
  if (!after.answered) {
    *cause = "unreachable";
    return Status::Unavailable("no weight source answered (" + after.last.message() + ")");
  }
  if (after.newest <= std::max(pulled_, current_.load())) {
    spdlog::info("the version being pulled went away with its source ({}); waiting for a newer one", s.message());
    return Status::OK();
  }
  *cause = "pull";
  return s.WithContext("pulling weights");
}

Status WeightSync::Pull(uint64_t min_version) {
  weights::PullOptions o = pull_;
  o.sources = options_.sources;
  o.min_version = min_version;
  o.stall_ms = options_.stall_ms;
  o.request_ms = kRequestMs;
  o.give_up_s = std::min(kMaxPullSeconds, std::max(1.0, options_.fallback_s));
  o.stop = options_.process_stop ? options_.process_stop : &stop_;
  if (options_.events) options_.events->Emit("weights-pulling", {{"min_version", min_version}});
  weights::PullReport report;
  RL_ASSIGN_OR_RETURN(weights::Bundle b, puller_->Pull(o, &report));
  int64_t start = MonoMillis();
  auto decoded = model::DecodeModel(std::string_view(b.data(), b.size()));
  if (!decoded.ok()) {
    // Whole and verified, yet no model we can use: the same bytes would fail again.
    bad_version_ = b.version;
    spdlog::error("weights version {} from {}: {}; keeping version {}", b.version, report.source,
                  decoded.status().message(), current_.load());
    if (options_.events) {
      options_.events->Emit("weights-bad", {{"version", b.version}, {"from", report.source},
                                            {"error", decoded.status().ToString()}});
    }
    return Status::OK();
  }
  double decode_s = (MonoMillis() - start) / 1000.0;
  pulled_ = static_cast<int64_t>(b.version);
  if (relay_) {
    Status served = relay_->Publish(b);
    if (!served.ok()) spdlog::warn("serving version {}: {}", b.version, served.message());
  }
  if (options_.events) {
    options_.events->Emit("weights-arrived",
                          {{"version", b.version}, {"from", report.source}, {"bytes", b.size()},
                           {"digest", weights::DigestHex(b.digest())}, {"pull_s", report.seconds},
                           {"decode_s", decode_s}, {"failovers", report.failovers},
                           {"restarts", report.restarts}, {"refetched", report.refetched}});
  }
  std::lock_guard<std::mutex> lock(mu_);
  arrived_ = Arrived{std::move(decoded->model), b.version, report.source, weights::DigestHex(b.digest()), report,
                     MonoMillis()};
  return Status::OK();
}

void WeightSync::Succeeded() {
  last_ok_ms_ = MonoMillis();
  warned_.clear();
  if (!fallback_.exchange(false)) return;
  spdlog::info("weights over UCX work again: weights files are left alone");
  if (options_.events) options_.events->Emit("weights-fallback-end");
}

void WeightSync::Failed(const std::string& cause, const Status& why, bool now) {
  if (!now && MonoMillis() - last_ok_ms_ < static_cast<int64_t>(options_.fallback_s * 1000)) {
    spdlog::debug("weights over UCX: {}", why.message());
    return;
  }
  fallback_ = true;
  if (!warned_.insert(cause).second) return;  // one line per cause, not one per look
  std::string instead = !options_.fallback_dir.empty()
                            ? "reading weights files from " + options_.fallback_dir + (now ? "" : " until it works again")
                            : now ? "and there is no --checkpoint-dir to fall back on"
                                  : "no --checkpoint-dir to fall back on; still trying";
  std::string within = now ? "" : " for " + std::to_string(static_cast<int>(options_.fallback_s)) + " s";
  spdlog::warn("weights over UCX failed{}: {}; {}", within, why.message(), instead);
  if (options_.events) options_.events->Emit("weights-fallback", {{"cause", cause}, {"why", why.message()}});
}

bool WeightSync::HasNewer(uint64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  return arrived_ && arrived_->version > version;
}

bool WeightSync::SwitchIfNewer(Policy* policy) {
  current_ = policy->loaded() ? static_cast<int64_t>(policy->version()) : -1;
  std::optional<Arrived> a;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!arrived_) return false;
    if (!policy->loaded() || arrived_->version > policy->version()) a = std::move(arrived_);
    arrived_.reset();
  }
  if (!a) return false;
  uint64_t before = policy->version();
  double waited = (MonoMillis() - a->at_ms) / 1000.0;
  if (Status s = policy->Use(std::move(a->model), a->version, a->source); !s.ok()) {
    spdlog::error("weights version {}: {}; keeping version {}", a->version, s.ToString(), before);
    return false;
  }
  current_ = static_cast<int64_t>(a->version);
  health::Progress().version = static_cast<int64_t>(a->version);
  spdlog::info("weights version {} over UCX from {} (pulled in {:.3f} s, held {:.3f} s until this batch boundary; was {})",
               a->version, a->source, a->report.seconds, waited, before);
  if (options_.events) {
    options_.events->Emit("weights", {{"version", a->version}, {"via", "ucx"}, {"from", a->source},
                                      {"digest", a->digest}, {"seconds", a->report.seconds},
                                      {"waited_s", waited}, {"failovers", a->report.failovers},
                                      {"restarts", a->report.restarts}, {"refetched", a->report.refetched}});
  }
  return true;
}

}  // namespace rl::rollout
