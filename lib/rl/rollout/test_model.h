// A tiny random model for the tests of lib/rl/rollout (not part of the library).
#pragma once

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "rl/model/model_file.h"
#include "rl/model/prompt_encoder.h"
#include "rl/model/test_util.h"
#include "rl/model/transformer.h"
#include "rl/rollout/policy.h"

namespace rl::rollout::testing {

inline const bool kSingleThreaded = (at::set_num_threads(1), true);

inline model::ModelConfig TinyConfig() { return model::testing::TinyLlama(32, 64, 2, 4, 2, 16); }

// The demo's model directory (its tokenizer: <bos> 1, <eos> 2, digits 3..12, '+' 13, '=' 14) and
// its encoder without a chat template, opened once.
inline const model::ModelDir& DemoModelDir() {
  static const model::ModelDir dir = model::OpenModelDir(model::testing::DemoDir()).value();
  return dir;
}
inline const model::PromptEncoder& DemoEncoder() {
  static const model::PromptEncoder enc = model::PromptEncoder::Create(DemoModelDir(), "none").value();
  return enc;
}

// A fresh directory for this test, removed by the caller.
inline std::string TestDir(const std::string& what) {
  std::string dir = ::testing::TempDir() + "/" + what + "-" + std::to_string(::getpid()) + "-" +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Writes <dir>/weights-<version>.safetensors of a model drawn from `seed`.
inline void WriteWeights(const std::string& dir, uint64_t version, uint64_t seed) {
  auto m = model::Transformer::Create(TinyConfig(), seed);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  Status s = model::SaveModelFile(dir + "/" + WeightsFileName(version), *m, version);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

}  // namespace rl::rollout::testing
