// rl-profile decode's output: the table people read and the JSON object scripts read
// (decode_profile.h). Ratios are ours over torch's tokens/s; fractions are ours over the bound the
// machine's measured bandwidth or matmul FLOP/s allows.
#include <cstdio>
#include <string>

#include "rl/train/decode_profile.h"

namespace rl::train {
namespace {

// Weights read once per decode step serve `batch` tokens.
double BandwidthBound(const DecodeReport& r, int64_t batch) {
  return r.weight_bytes > 0 ? static_cast<double>(batch) * r.machine.read_gb_s * 1e9 / static_cast<double>(r.weight_bytes)
                            : 0;
}

// 2 FLOPs per parameter per token (forward); training takes three times that (forward, backward).
double FlopBound(const DecodeReport& r, const DecodeFigure& f) {
  const double per_token = (f.figure == "train" ? 6.0 : 2.0) * static_cast<double>(r.matmul_parameters);
  return per_token > 0 ? r.machine.matmul_gflop_s * 1e9 / per_token : 0;
}

std::optional<double> Ratio(const DecodeFigure& f) {
  if (!f.torch_tps()) return std::nullopt;
  return f.ours_tps() / *f.torch_tps();
}

template <typename T>
nlohmann::json OrNull(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// "812/1024 MiB": the peaks of ours and torch's, or "" off a GPU.
std::string Peaks(const DecodeFigure& f) {
  if (!f.ours_peak_bytes) return "";
  char out[64];
  const auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
  if (f.torch_peak_bytes) {
    std::snprintf(out, sizeof out, "%.0f/%.0f", mib(*f.ours_peak_bytes), mib(*f.torch_peak_bytes));
  } else {
    std::snprintf(out, sizeof out, "%.0f/-", mib(*f.ours_peak_bytes));
  }
  return out;
}

}  // namespace

nlohmann::json DecodeReportJson(const DecodeReport& r, const DecodeProfileOptions& o) {
  nlohmann::json figures = nlohmann::json::array();
  for (const DecodeFigure& f : r.figures) {
    nlohmann::json j = {{"figure", f.figure},
                        {"batch", f.batch},
                        {"tokens", f.tokens},
                        {"ours_seconds", f.ours_s},
                        {"ours_tokens_per_s", f.ours_tps()},
                        {"torch_seconds", OrNull(f.torch_s)},
                        {"torch_tokens_per_s", OrNull(f.torch_tps())},
                        {"ours_vs_torch", OrNull(Ratio(f))},
                        {"of_matmul", f.ours_tps() / FlopBound(r, f)},
                        {"ours_peak_bytes", OrNull(f.ours_peak_bytes)},
                        {"torch_peak_bytes", OrNull(f.torch_peak_bytes)}};
    if (f.figure == "decode") j["of_bandwidth"] = f.ours_tps() / BandwidthBound(r, f.batch);
    figures.push_back(j);
  }
  nlohmann::json torch = {{"available", r.torch_unavailable.empty()}};
  if (!r.torch_unavailable.empty()) torch["reason"] = r.torch_unavailable;
  torch["check_max_abs_diff"] = OrNull(r.torch_check);
  return {{"model", r.model},
          {"architecture", r.architecture},
          {"parameters", r.parameters},
          {"matmul_parameters", r.matmul_parameters},
          {"weight_bytes", r.weight_bytes},
          {"threads", o.threads},
          {"device", r.machine.where},
          {"precision", o.precision},
          {"prompt_tokens", o.prompt_tokens},
          {"new_tokens", o.max_new_tokens},
          {"machine",
           {{"where", r.machine.where},
            {"read_gb_per_s", r.machine.read_gb_s},
            {"copy_gb_per_s", r.machine.copy_gb_s},
            {"matmul_gflop_per_s", r.machine.matmul_gflop_s},
            {"matmul_n", r.machine.matmul_n}}},
          {"torch", torch},
          {"figures", figures},
          {"train_check",
           {{"loss_ours", r.loss_ours},
            {"loss_torch", OrNull(r.loss_torch)},
            {"grad_norm_ours", r.grad_norm_ours},
            {"grad_norm_torch", OrNull(r.grad_norm_torch)}}}};
}

void PrintDecodeReport(const DecodeReport& r, const DecodeProfileOptions& o) {
  std::printf("model %s: %s, %.1fM parameters, %s on %s; %d thread%s; prompts of %lld tokens, responses of %lld\n",
              r.model.c_str(), r.architecture.c_str(), static_cast<double>(r.parameters) / 1e6, o.precision.c_str(),
              r.machine.where.c_str(), o.threads, o.threads == 1 ? "" : "s", static_cast<long long>(o.prompt_tokens),
              static_cast<long long>(o.max_new_tokens));
  std::printf("%s: read %.1f GB/s, copy %.1f GB/s, %s matmul %.1f GFLOP/s (n=%lld)\n",
              r.machine.where == "cpu" ? "machine" : r.machine.where.c_str(), r.machine.read_gb_s, r.machine.copy_gb_s,
              o.bf16() ? "bf16" : "f32", r.machine.matmul_gflop_s, static_cast<long long>(r.machine.matmul_n));
  const bool peaks = !r.figures.empty() && r.figures.front().ours_peak_bytes.has_value();
  std::printf("%-8s %5s %8s %12s %12s %11s %9s %9s%s\n", "figure", "batch", "tokens", "ours tok/s", "torch tok/s",
              "ours/torch", "of bw", "of flops", peaks ? "  peak MiB ours/torch" : "");
  for (const DecodeFigure& f : r.figures) {
    char torch[32] = "-", ratio[32] = "-", bw[32] = "";
    if (f.torch_tps()) {
      std::snprintf(torch, sizeof torch, "%.1f", *f.torch_tps());
      std::snprintf(ratio, sizeof ratio, "%.2fx", *Ratio(f));
    }
    if (f.figure == "decode") std::snprintf(bw, sizeof bw, "%.1f%%", 100 * f.ours_tps() / BandwidthBound(r, f.batch));
    std::printf("%-8s %5lld %8lld %12.1f %12s %11s %9s %8.1f%%  %s\n", f.figure.c_str(), static_cast<long long>(f.batch),
                static_cast<long long>(f.tokens), f.ours_tps(), torch, ratio, bw, 100 * f.ours_tps() / FlopBound(r, f),
                Peaks(f).c_str());
  }
  if (!r.torch_unavailable.empty()) {
    std::printf("torch: not run (%s)\n", r.torch_unavailable.c_str());
    return;
  }
  std::printf("check: torch's cached decode vs the float64 reference, max |diff| %.2g; GRPO step loss ours %.6g "
              "torch %.6g, gradient norm ours %.6g torch %.6g\n",
              r.torch_check.value_or(-1), r.loss_ours, r.loss_torch.value_or(0), r.grad_norm_ours,
              r.grad_norm_torch.value_or(0));
}

}  // namespace rl::train
