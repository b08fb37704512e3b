#include "rl/train/cli.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "rl/core/log.h"
#include "rl/core/options.h"
#include "rl/core/signals.h"
#include "rl/health/flags.h"
#include "rl/train/commands.h"

namespace rl::train {

namespace {

void BindGrpo(CommandLine& cl, CLI::App* g, GrpoFlags* f) {
  GrpoLoopOptions& o = f->loop;
  cl.Bind(g, "--connect", &o.connect);
  cl.Bind(g, "--timeout", &o.timeout_s);
  cl.Require(cl.Bind(g, "--checkpoint-dir", &o.checkpoint_dir));
  cl.Require(cl.Bind(g, "--prompts", &o.prompts));
  model::BindPromptFlags(cl, g, &o.prompt, true);
  cl.Bind(g, "--eval-data", &o.eval_data);
  cl.Bind(g, "--verifier", &o.verifier)->check(CLI::IsMember({"addition", "exact", "numeric", "math"}));
  cl.Bind(g, "--max-new-tokens", &o.eval_max_new_tokens)->check(kNonNegative);
  cl.Bind(g, "--weights", &o.weights);
  cl.Bind(g, "--run-dir", &o.run_dir);
  cl.Bind(g, "--id", &o.id);
  cl.Bind(g, "--seed", &o.seed);
  cl.Bind(g, "--threads", &f->threads)->check(CLI::Range(1, 256));
  cl.Bind(g, "--device", &f->device);
  cl.Bind(g, "--precision", &f->precision)->check(CLI::IsMember({"float32", "bf16"}));
  cl.Bind(g, "--lr", &o.grpo.schedule.lr)->check(kPositive);
  cl.Bind(g, "--warmup-steps", &o.grpo.schedule.warmup_steps)->check(CLI::Range(0, 1000000));
  cl.Bind(g, "--lr-decay", &f->lr_decay)->check(CLI::IsMember({"constant", "linear", "cosine"}));
  cl.Bind(g, "--min-lr-ratio", &o.grpo.schedule.min_ratio)->check(CLI::Range(0.0, 1.0));
  cl.Bind(g, "--clip", &o.grpo.clip)->check(CLI::Range(0.0, 10.0));
  cl.Bind(g, "--kl-coef", &o.grpo.kl_coef)->check(kNonNegative);
  cl.BindFlag(g, "--ref-from-queue", &o.grpo.ref_from_rows);
  cl.BindFlag(g, "--routing-replay", &o.grpo.routing_replay);
  cl.Bind(g, "--kl-estimator", &f->kl_estimator)->check(CLI::IsMember({"k3", "k2"}));
  cl.Bind(g, "--sft-data", &o.sft_data);
  cl.Bind(g, "--sft-coef", &o.grpo.sft_coef)->check(kNonNegative);
  cl.Bind(g, "--sft-batch", &o.grpo.sft_batch)->check(CLI::Range(1, 1 << 20));
  f->response_key_option = cl.Bind(g, "--response-key", &o.sft_response_key);
  cl.Bind(g, "--grad-clip", &o.grpo.grad_clip)->check(kNonNegative);
  cl.Bind(g, "--weight-decay", &o.grpo.adamw.weight_decay)->check(kNonNegative);
  cl.Bind(g, "--loss-norm", &f->loss_norm)
      ->check(CLI::IsMember({"token", "sequence", "token-mean", "seq-mean-token-mean", "seq-mean-token-sum",
                             "seq-mean-token-sum-norm"}));
  cl.Bind(g, "--loss-norm-constant", &o.grpo.norm_constant)->check(kNonNegative);
  cl.Bind(g, "--minibatches", &o.grpo.minibatches)->check(CLI::Range(1, 100000));
  cl.Bind(g, "--epochs", &o.grpo.epochs)->check(CLI::Range(1, 1000));
  cl.Bind(g, "--temperature", &o.grpo.temperature)->check(Temperature(false));
  cl.Bind(g, "--dump-dir", &o.grpo.dump_dir);
  cl.Bind(g, "--correction", &f->correction)->check(CLI::IsMember({"none", "tis", "decoupled"}));
  cl.Bind(g, "--correction-cap", &o.grpo.off.cap)->check(kPositive);
  cl.Bind(g, "--advantage", &f->advantage)
      ->check(CLI::IsMember({"grpo", "rloo", "reinforce++", "reinforce++-baseline", "gae"}));
  cl.Bind(g, "--gamma", &o.grpo.gamma)->check(CLI::Range(0.0, 1.0));
  cl.Bind(g, "--lambda", &o.grpo.lambda)->check(CLI::Range(0.0, 1.0));
  cl.Bind(g, "--value-clip", &o.grpo.value_clip)->check(kNonNegative);
  cl.Bind(g, "--critic-lr", &o.grpo.critic_lr)->check(kNonNegative);
  cl.Bind(g, "--critic-config", &o.critic_config);
  cl.Bind(g, "--freeze", &o.grpo.freeze);
  cl.Bind(g, "--micro-batch", &o.grpo.micro_batch)->check(CLI::Range(1, 1 << 20));
  cl.Bind(g, "--group-size", &o.group_size)->check(CLI::Range(1, 4096));
  cl.Bind(g, "--prompts-per-step", &o.prompts_per_step)->check(CLI::Range(1, 100000));
  cl.Bind(g, "--max-steps", &o.max_steps)->check(kNonNegative);
  cl.Bind(g, "--mode", &f->mode)->check(CLI::IsMember({"sync", "semi-sync", "async"}));
  f->staleness = cl.Bind(g, "--max-staleness", &f->staleness_value)->check(CLI::Range(0, 1000));
  f->fraction = cl.Bind(g, "--start-fraction", &f->fraction_value)->check(CLI::Range(0.0, 1.0));
  cl.Bind(g, "--dynamic-sampling", &o.dynamic_sampling);
  cl.Bind(g, "--max-redraws", &o.max_redraws)->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  cl.Bind(g, "--stale-rows", &f->stale_rows)->check(CLI::IsMember({"regenerate", "drop"}));
  cl.Bind(g, "--lease-seconds", &o.lease_s)->check(kLeaseSeconds);
  cl.Bind(g, "--eval-every", &o.eval_every)->check(kNonNegative);
  cl.Bind(g, "--eval-size", &o.eval_size)->check(CLI::Range(1, 100000));
  cl.Bind(g, "--export-dir", &f->export_dir);
  cl.Bind(g, "--tokenizer-from", &f->tokenizer_from);
  cl.Bind(g, "--keep-checkpoints", &o.keep)->check(CLI::Range(1, 1000));
  cl.Bind(g, "--collapse-drop", &o.collapse_drop)->check(CLI::Range(0.0, 1.0));
  cl.Bind(g, "--weights-bind", &o.publish.bind);
  cl.Bind(g, "--max-pulls", &o.publish.max_pulls)->check(CLI::Range(1, 1024));
  f->world = cl.Bind(g, "--world", &o.world);
  f->rank = cl.Bind(g, "--rank", &o.rank);
  cl.Bind(g, "--rendezvous", &o.rendezvous);
  cl.Bind(g, "--group-epoch", &o.group_epoch);
  cl.Bind(g, "--group-timeout", &o.group_timeout_s)->check(CLI::Range(1.0, 86400.0));
  cl.Bind(g, "--chunk-size", &o.publish.chunk_size)->check(CLI::Range(weights::kMinChunkBytes, weights::kMaxChunkBytes));
}

void BindSft(CommandLine& cl, CLI::App* s, SftFlags* f) {
  cl.Require(cl.Bind(s, "--data", &f->data));
  cl.Bind(s, "--result-open", &f->result_open);
  cl.Bind(s, "--result-close", &f->result_close);
  cl.Require(cl.Bind(s, "--checkpoint-dir", &f->checkpoint_dir));
  cl.Bind(s, "--weights", &f->weights);
  model::BindPromptFlags(cl, s, &f->prompt, true);
  f->response_key_option = cl.Bind(s, "--response-key", &f->response_key);
  cl.Bind(s, "--model-config", &f->model_config);
  cl.Bind(s, "--eval-data", &f->eval_data);
  cl.Bind(s, "--verifier", &f->verifier)->check(CLI::IsMember({"addition", "exact", "numeric", "math"}));
  cl.Bind(s, "--max-new-tokens", &f->sft.eval_max_new_tokens)->check(kNonNegative);
  cl.Bind(s, "--run-dir", &f->run_dir);
  cl.Bind(s, "--id", &f->id);
  cl.Bind(s, "--seed", &f->sft.seed);
  cl.Bind(s, "--threads", &f->threads)->check(CLI::Range(1, 256));
  cl.Bind(s, "--device", &f->device);
  cl.Bind(s, "--precision", &f->precision)->check(CLI::IsMember({"float32", "bf16"}));
  cl.Bind(s, "--lr", &f->sft.schedule.lr)->check(kPositive);
  cl.Bind(s, "--warmup-steps", &f->sft.schedule.warmup_steps)->check(CLI::Range(0, 1000000));
  cl.Bind(s, "--lr-decay", &f->lr_decay)->check(CLI::IsMember({"constant", "linear", "cosine"}));
  cl.Bind(s, "--min-lr-ratio", &f->sft.schedule.min_ratio)->check(CLI::Range(0.0, 1.0));
  cl.Bind(s, "--batch-size", &f->sft.batch_size)->check(CLI::Range(1, 1 << 20));
  cl.Bind(s, "--max-steps", &f->sft.max_steps)->check(CLI::Range(1, 100000000));
  cl.Bind(s, "--target-accuracy", &f->sft.target_accuracy)->check(CLI::Range(0.0, 1.0));
  cl.Bind(s, "--eval-every", &f->sft.eval_every)->check(CLI::Range(1, 1000000));
  cl.Bind(s, "--eval-size", &f->eval_size)->check(CLI::Range(1, 100000));
  cl.Bind(s, "--grad-clip", &f->sft.grad_clip)->check(kNonNegative);
  cl.Bind(s, "--weight-decay", &f->sft.adamw.weight_decay)->check(kNonNegative);
}

void BindScore(CommandLine& cl, CLI::App* s, ScoreFlags* f) {
  cl.Require(cl.Bind(s, "--model", &f->model));
  cl.Bind(s, "--weights", &f->weights);
  cl.Bind(s, "--task", &f->task);
  cl.Bind(s, "--temperature", &f->temperature)->check(Temperature(false));
  cl.Bind(s, "--count", &f->count)->check(CLI::Range(1, 100000))->description("rows per get");
  cl.Bind(s, "--micro-batch", &f->micro_batch)->check(CLI::Range(1, 1 << 20));
  cl.Bind(s, "--threads", &f->threads)->check(CLI::Range(1, 256));
  cl.Bind(s, "--device", &f->device);
  cl.Bind(s, "--connect", &f->connect);
  cl.Bind(s, "--timeout", &f->timeout_s);
  cl.Bind(s, "--lease", &f->lease_s)->check(kLeaseSeconds);
  cl.Bind(s, "--wait", &f->wait_s)->check(CLI::Range(0.0, 3600.0));
  cl.Bind(s, "--progress-interval", &f->progress_s)->check(kNonNegative);
  cl.Bind(s, "--run-dir", &f->run_dir);
  cl.Bind(s, "--id", &f->id);
  cl.BindFlag(s, "--routing-replay", &f->routing_replay);
}

}  // namespace

int TrainMain(int argc, char** argv) {
  CommandLine cl(kTool, "rl-train: SFT warm start and GRPO training against rl-queue (see man rl-train)");
  std::string log_level = "info";
  cl.Bind(nullptr, "--log-level", &log_level);
  SftFlags sf;
  CLI::App* sft = cl.Sub("sft", "supervised warm start; writes CHECKPOINT_DIR/weights-0.safetensors");
  BindSft(cl, sft, &sf);
  GrpoFlags gf;
  CLI::App* grpo = cl.Sub("grpo", "GRPO training from task 'train' of rl-queue, feeding it prompts");
  BindGrpo(cl, grpo, &gf);
  ScoreFlags scf;
  CLI::App* score = cl.Sub("score", "the reference model of the KL term as a role: writes ref_logprobs into the "
                                    "rows of a queue task (default 'ref') until stopped");
  BindScore(cl, score, &scf);
  health::HeartbeatFlags sft_beat, grpo_beat, score_beat;
  sft_beat.Bind(cl, sft);
  grpo_beat.Bind(cl, grpo);
  score_beat.Bind(cl, score);
  EvalFlags ef;
  CLI::App* eval = cl.Sub("eval", "greedy pass@1 and sampled mean@k of a model on a dataset (one JSON line)");
  model::BindPromptFlags(cl, eval, &ef.prompt, true);
  cl.Bind(eval, "--weights", &ef.weights);
  cl.Require(cl.Bind(eval, "--data", &ef.data));
  cl.Bind(eval, "--verifier", &ef.verifier)->check(CLI::IsMember({"addition", "exact", "numeric", "math"}));
  cl.Bind(eval, "--eval-size", &ef.eval_size)->check(CLI::Range(1, 100000));
  cl.Bind(eval, "--threads", &ef.threads)->check(CLI::Range(1, 256));
  cl.Bind(eval, "--device", &ef.device);
  cl.Bind(eval, "--samples", &ef.eval.samples)->check(CLI::Range(0, 1024));
  cl.Bind(eval, "--temperature", &ef.eval.temperature)->check(Temperature(true));
  cl.Bind(eval, "--max-new-tokens", &ef.eval.max_new_tokens)->check(kNonNegative);
  cl.Bind(eval, "--slots", &ef.eval.slots)->check(CLI::Range(1, 4096));
  cl.Bind(eval, "--seed", &ef.eval.seed);
  ExportFlags xf;
  CLI::App* exp = cl.Sub("export", "a model file or checkpoint as a Hugging Face model directory");
  cl.Require(cl.Bind(exp, "--weights", &xf.weights));
  cl.Require(cl.Bind(exp, "--out", &xf.out));
  cl.Bind(exp, "--tokenizer-from", &xf.tokenizer_from);
  cl.Bind(exp, "--dtype", &xf.dtype)->check(CLI::IsMember({"float32", "bfloat16", "float16"}));
  DataFlags df;
  CLI::App* data = cl.Sub("make-data", "problems as JSON lines {\"prompt\", \"answer\"} on stdout");
  cl.Bind(data, "--problems", &df.problems)->check(CLI::Range(1, 100000000));
  cl.Bind(data, "--seed", &df.seed);
  cl.Bind(data, "--task", &df.task)->check(CLI::IsMember({"addition", "words", "multiply", "chain"}))
      ->description("addition (3-digit, the default) or words (English word problems)");
  cl.BindFlag(data, "--heldout", &df.heldout);
  cl.Bind(data, "--response-format", &df.response_format)->check(CLI::IsMember({"none", "gsm8k", "boxed", "tools"}));
  cl.Bind(data, "--max-number", &df.max_number)->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  cl.Bind(data, "--split", &df.split)->check(CLI::IsMember({"numbers", "cast"}));
  model::PromptFlags encode_flags;
  CLI::App* encode = cl.Sub("encode", "JSON lines on stdin with the prompt_ids rl-train would feed for them added");
  model::BindPromptFlags(cl, encode, &encode_flags, false);
  cl.app().require_subcommand(1);
  if (auto code = cl.Parse(argc, argv)) return *code;
  if (Status s = InitLogging(kTool, log_level); !s.ok()) return Fail(kTool, s);
  const std::atomic<bool>& stop = InstallStopSignals();
  // SFT reports itself as role "sft": a warm start is no pipeline trainer, whose stalls count.
  auto beat = sft->parsed()    ? sft_beat.Start("sft", sf.id)
              : grpo->parsed() ? grpo_beat.Start("train", gf.loop.id, {{"queue", gf.loop.connect}})
              : score->parsed() ? score_beat.Start("ref", scf.id, {{"queue", scf.connect}})
                               : Result<std::unique_ptr<health::HeartbeatSender>>(std::unique_ptr<health::HeartbeatSender>());
  if (!beat.ok()) return Fail(kTool, beat.status());
  if (sft->parsed()) return RunSftCommand(sf, stop);
  if (grpo->parsed()) return RunGrpoCommand(gf, stop);
  if (score->parsed()) return RunScoreCommand(scf, stop);
  if (eval->parsed()) return RunEvalCommand(ef, std::cout);
  if (exp->parsed()) return RunExportCommand(xf, std::cout);
  if (data->parsed()) return RunMakeData(df, std::cout);
  if (encode->parsed()) return RunEncodeCommand(encode_flags, std::cin, std::cout);
  return kExitUsage;
}

}  // namespace rl::train
