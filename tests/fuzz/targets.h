// Fuzz entry points over the decoders that read bytes from outside: wire frames and request
// bodies, write-ahead-log files, snapshot files, tokenizer.json files, chat templates, weight
// files, checkpoints, model configs and train rows (model_target.cc), and the smaller ones
// (inputs_target.cc). libFuzzer drives them (fuzz_*.cc, clang builds with
// -DRL_BUILD_FUZZERS=ON) and corpus_replay_test.cc replays the saved corpus in every build.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rl::fuzz {

// Splits data into frames and runs the request decoder and every op's body decoder.
void FuzzFrames(const uint8_t* data, size_t size);
// Scans data as a log file and applies each decoded record to a Store.
void FuzzWal(const uint8_t* data, size_t size);
// Decodes data as a snapshot file and loads it into a Store.
void FuzzSnapshot(const uint8_t* data, size_t size);
// Loads "tokenizer.json|#|text" as a tokenizer and encodes and decodes the text with it
// (tokenizer_target.cc; replayed by rl_tokenizer_test, which links the tokenizer library).
void FuzzTokenizer(const uint8_t* data, size_t size);
// Parses "template|#|messages JSON" as a chat template (a tokenizer_config.json's) and renders
// the messages with it, with and without tools and a generation prompt (chat_target.cc;
// replayed by rl_chat_test, which links the chat library). Returns how many of the two renders
// succeeded, so that the replay can tell a corpus that renders from one that never parses.
int FuzzChatTemplate(const uint8_t* data, size_t size);
// "<kind>|#|bytes" to one group of the smaller decoders (inputs_target.cc): env (rl-env's call
// and ping bodies), health (heartbeat and probe frames, spare activations, slot and id lists),
// weights (the weight sources' bodies and blobs), events (event-log lines, then every report
// rl-profile draws from them), dataset (JSONL records), pipeline (rl-watchdog's TOML), plan
// (rl-profile plan's decode profile), text (the calculator tool, tool reply lines, math
// answers). Any other input goes to all of them.
void FuzzInputs(const uint8_t* data, size_t size);
// "<kind>|#|bytes" to the files and rows a model-holding role reads (model_target.cc; replayed by
// rl_train_test, which links libtorch): safetensors (any file), model (a model file, then 2 tokens
// through the model it holds), checkpoint (a trainer checkpoint, likewise), config (config.json;
// built and run when small), rows (a get reply's body and frames, sorted as the trainer sorts them,
// then scored by a tiny Qwen3-MoE with the rows' routes replayed). Any other input goes to all.
void FuzzModelFiles(const uint8_t* data, size_t size);

}  // namespace rl::fuzz
