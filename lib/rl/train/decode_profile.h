// rl-profile decode: the learning roles' compute on any Hugging Face model directory, beside
// python3-torch running the same weights in the same run (tests/reference/decode_reference.py,
// see torch_baseline.h), and beside what the machine allows (memory bandwidth and f32 matmul
// FLOP/s, measured in the same run).
//
// Figures: prefill and decode tokens/s at each batch size (B prompts of --prompt-tokens random
// ids decoded together as model::Generate does with every slot busy: a KvCache, ForwardStep,
// the Sampler at temperature 1, --max-new-tokens tokens each, no stop at eos), and the tokens/s
// of one GRPO step (GrpoTrainer: forward over prompt and response, token log-probabilities,
// clipped loss, backward, AdamW) over --sequences sequences. Prefill is the time to the first
// sampled token (B * prompt_tokens tokens), decode the rest (B * (max_new_tokens - 1) tokens).
// Lives in lib/rl/train because it needs the model and the trainer; tools/rl-profile adds it
// when the libtorch parts are built.
// Thread safety: runs on the calling thread; libtorch uses --threads intra-op threads.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "rl/core/options.h"
#include "rl/core/status.h"
#include "rl/profile/cli.h"

namespace rl::train {

struct DecodeProfileOptions {
  std::string model;                   // a Hugging Face model directory (required)
  std::string weights;                 // a roleflow model file to use instead of the directory's weights
  std::vector<int64_t> batches = {1, 16, 64};
  int64_t prompt_tokens = 64;
  int64_t max_new_tokens = 64;         // every response runs this long, so both sides do the same work
  int64_t sequences = 16;              // in the GRPO step
  int runs = 1;                        // of each figure, on each side; the median is printed
  int threads = 1;
  uint64_t seed = 1;
  bool json = false;
  std::string device = "cpu";  // both sides run there (model/device.h)
  // bf16: bfloat16 weights for generation, bf16 training with float32 masters (torch: bfloat16
  // weights for generation, autocast over float32 weights for training).
  std::string precision = "float32";
  bool bf16() const { return precision == "bf16"; }
};

// Tokens/s of one figure, ours and torch's (nullopt when torch did not run).
struct DecodeFigure {
  std::string figure;  // "prefill", "decode" or "train"
  int64_t batch = 0;   // sequences at once
  int64_t tokens = 0;
  double ours_s = 0;
  std::optional<double> torch_s;
  // On a GPU: the peak of the caching allocator during the figure (torch.cuda.max_memory_allocated).
  std::optional<int64_t> ours_peak_bytes, torch_peak_bytes;
  double ours_tps() const { return ours_s > 0 ? static_cast<double>(tokens) / ours_s : 0; }
  std::optional<double> torch_tps() const {
    if (!torch_s || *torch_s <= 0) return std::nullopt;
    return static_cast<double>(tokens) / *torch_s;
  }
};

// What this machine allows, measured in the same run with --threads threads; on a GPU, what the
// device allows (its reads, a device-to-device copy, matmul in the compute dtype).
struct MachineFigures {
  std::string where = "cpu"; // the device measured
  double read_gb_s = 0;      // summing a 512 MiB float array (at::sum), best of 3
  double copy_gb_s = 0;      // memcpy of 256 MiB (a GPU: a tensor copy), bytes read + written, best of 3
  double matmul_gflop_s = 0; // at::mm of two square matrices in the compute dtype, best of 3
  int64_t matmul_n = 0;
};

struct DecodeReport {
  std::string model, architecture;
  int64_t parameters = 0;
  int64_t matmul_parameters = 0;  // those a token multiplies by (an untied input embedding is only
                                  // read by row; of a sparse layer, only its k experts)
  int64_t weight_bytes = 0;       // bytes of weights one decode step reads (in the compute dtype;
                                  // every expert, which a batch of many tokens does)
  MachineFigures machine;
  std::string torch_unavailable;  // why torch did not run; empty when it did
  std::optional<double> torch_check;  // decode_reference.py's cached float32 decode vs hf_reference, max |diff|
  std::vector<DecodeFigure> figures;  // prefill and decode per batch, then train
  double loss_ours = 0, grad_norm_ours = 0;
  std::optional<double> loss_torch, grad_norm_torch;
};

// Config/NotFound/DataError when the model cannot be opened; InvalidArgument when the prompts and
// responses do not fit its context; Internal when the torch baseline fails (a missing python3-torch
// is not an error: torch_unavailable says so).
Result<DecodeReport> MeasureDecode(const DecodeProfileOptions& options);

// The report as one JSON object (the --json output), and as the table people read, on stdout
// (decode_report.cc).
nlohmann::json DecodeReportJson(const DecodeReport& r, const DecodeProfileOptions& o);
void PrintDecodeReport(const DecodeReport& r, const DecodeProfileOptions& o);

// Registers `decode` on rl-profile's command line (see profile/cli.h).
profile::Subcommand AddDecodeProfile(CommandLine& cl);

}  // namespace rl::train
