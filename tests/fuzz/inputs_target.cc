// Fuzz entry point over the smaller decoders of outside bytes: see targets.h. An input is
// "<kind>|#|<bytes>"; an input of no known kind goes whole to every decoder, so that mutations
// of the kind itself still reach them all.
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "rl/env/calc.h"
#include "rl/env/protocol.h"
#include "rl/env/tool.h"
#include "rl/health/heartbeat.h"
#include "rl/health/pipeline.h"
#include "rl/health/slots.h"
#include "rl/health/spare.h"
#include "rl/profile/ettr.h"
#include "rl/profile/plan_fit.h"
#include "rl/profile/report_cmd.h"
#include "rl/profile/report_events.h"
#include "rl/profile/timeline_svg.h"
#include "rl/task/dataset.h"
#include "rl/task/math_answer.h"
#include "rl/task/rational.h"
#include "rl/weights/protocol.h"
#include "targets.h"

namespace rl::fuzz {
namespace {

std::vector<std::string> Split(std::string_view all, size_t most = 16) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t at = all.find("|#|", start);
    parts.emplace_back(all.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos || parts.size() >= most) break;
    start = at + 3;
  }
  return parts;
}

// Frames as a message: the first is the body, the rest its blobs.
Message AsMessage(std::string_view bytes) {
  std::vector<std::string> frames = Split(bytes);
  Message m;
  m.body = frames.front();
  m.blobs.assign(frames.begin() + 1, frames.end());
  return m;
}

void Env(std::string_view bytes) {
  (void)env::DecodeCallRequest(bytes);
  (void)env::DecodeCallReply(bytes);
  (void)env::DecodePingReply(bytes);
}

void Health(std::string_view bytes) {
  const std::vector<std::string> frames = Split(bytes);
  (void)health::DecodeHeartbeat(frames);
  (void)health::DecodeProbe(frames);
  (void)health::DecodeActivation(std::string(bytes));
  (void)health::ParseSlot(std::string(bytes));
  (void)health::ParseIdList(std::string(bytes));
}

void Weights(std::string_view bytes) {
  const Message m = AsMessage(bytes);
  (void)weights::DecodeInfoReply(m);
  (void)weights::DecodeOpenRequest(m);
  (void)weights::DecodeOpenReply(m);
  (void)weights::DecodeCloseRequest(m);
  (void)weights::DecodeSendRequest(m);
}

// "lane|#|jsonl|#|lane|#|jsonl...": the run's event logs, then every report drawn from them.
void Events(std::string_view bytes) {
  const std::vector<std::string> parts = Split(bytes, 32);
  std::map<std::string, std::string> lanes;
  for (size_t i = 0; i + 1 < parts.size(); i += 2) lanes[parts[i]] = parts[i + 1];
  auto run = profile::ParseRunEvents(lanes);
  if (!run.ok()) return;
  auto timed = profile::ComputeEttr(*run);
  const profile::EttrReport report = timed.ok() ? *timed : profile::UntimedReport(*run);
  for (bool json : {false, true}) {
    std::ostringstream out;
    profile::PrintReport(report, *run, "run", json, out);
  }
  (void)profile::TimelineSvg(*run, report);
  for (int64_t warmup : {0, 1}) {
    (void)profile::MeasureRun(*run, warmup);
    (void)profile::FitRun(*run, warmup);
  }
}

void Dataset(std::string_view bytes) {
  task::DatasetOptions prompts;
  prompts.response_key = "response";
  (void)task::ParseExample(bytes, prompts);
  task::DatasetOptions chats;
  chats.messages_key = "messages";
  chats.system_prompt = "Be brief.";
  auto e = task::ParseExample(bytes, chats);
  if (e.ok()) (void)task::ExampleToJson(*e);
}

// rl-profile plan's decode profile, and the round times it interpolates.
void Plan(std::string_view bytes) {
  auto table = profile::ParseDecodeTable(std::string(bytes), "fuzz.json");
  if (!table.ok()) return;
  for (int64_t active : {0, 1, 3, 1000000}) (void)table->Round(active, active * 7);
}

void Pipeline(std::string_view bytes) { (void)health::ParsePipeline(std::string(bytes), "fuzz.toml"); }

// What a model writes and a tool answers: the calculator, a tool's reply line, math answers.
void Text(std::string_view bytes) {
  (void)env::EvalIntExpression(bytes);
  (void)env::CalcReply(std::string(bytes));
  (void)env::ParseReplyLine("calc", std::string(bytes));
  (void)task::MathReward(bytes, bytes);
  (void)task::MathReward(bytes, "42");
  (void)task::ParseRational(bytes);
  (void)task::ParseDecimal(bytes);
}

const std::map<std::string_view, std::function<void(std::string_view)>>& Kinds() {
  static const auto* kinds = new std::map<std::string_view, std::function<void(std::string_view)>>{
      {"env", Env},         {"health", Health},     {"weights", Weights}, {"events", Events},
      {"dataset", Dataset}, {"pipeline", Pipeline}, {"text", Text},
      {"plan", Plan}};
  return *kinds;
}

}  // namespace

void FuzzInputs(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t at = all.find("|#|");
  if (at != std::string_view::npos) {
    auto kind = Kinds().find(all.substr(0, at));
    if (kind != Kinds().end()) {
      kind->second(all.substr(at + 3));
      return;
    }
  }
  for (const auto& [name, fn] : Kinds()) fn(all);
}

}  // namespace rl::fuzz
