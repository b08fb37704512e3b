// What the GRPO tests share: a tiny Llama-architecture config, seeded batches of random samples
// (with and without multi-turn rewards) and a trainer with the tests' usual options.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "rl/model/test_util.h"
#include "rl/train/grpo_trainer.h"
#include "rl/train/sample.h"

namespace rl::train::grpo_fixture {

inline model::ModelConfig Tiny() { return model::testing::TinyLlama(16, 32, 1, 2, 0, 16); }

inline std::vector<Group> Batch(uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<Group> out;
  for (int g = 0; g < 3; ++g) {
    Group group{"i:" + std::to_string(g), {}};
    std::vector<int64_t> prompt = {1, 3 + int64_t(gen() % 10), 3 + int64_t(gen() % 10), 13, 3 + int64_t(gen() % 10), 14};
    for (int k = 0; k < 4; ++k) {
      Sample s;
      s.prompt_ids = prompt;
      int n = 1 + static_cast<int>(gen() % 3);
      for (int i = 0; i < n; ++i) s.response_ids.push_back(3 + int64_t(gen() % 10));
      s.response_ids.push_back(2);
      for (size_t i = 0; i < s.response_ids.size(); ++i) s.logprobs.push_back(-0.5f - 0.1f * float(gen() % 20));
      s.reward = static_cast<double>(gen() % 2);
      group.samples.push_back(std::move(s));
    }
    out.push_back(std::move(group));
  }
  return out;
}

// The batch as multi-turn rows: a first turn ending after the first token (reward -0.25, 0 or 0.5)
// when there is room, the answer turn to the end (reward 0), and on every fourth sample an
// unknown end first (its reward must count for nothing).
inline std::vector<Group> WithTurns(std::vector<Group> batch, uint64_t seed) {
  std::mt19937_64 gen(seed * 7 + 1);
  for (Group& g : batch) {
    for (size_t i = 0; i < g.samples.size(); ++i) {
      Sample& s = g.samples[i];
      const auto n = static_cast<int64_t>(s.response_ids.size());
      if (i % 4 == 3) {
        s.turn_ends.push_back(-1);
        s.turn_rewards.push_back(0.3f);
      }
      if (n >= 2) {
        s.turn_ends.push_back(1);
        s.turn_rewards.push_back(std::vector<float>{-0.25f, 0.0f, 0.5f}[gen() % 3]);
      }
      s.turn_ends.push_back(n);
      s.turn_rewards.push_back(0.0f);
    }
  }
  return batch;
}

inline std::unique_ptr<GrpoTrainer> NewTrainer(model::Transformer m) {
  GrpoOptions o;
  o.schedule.lr = 1e-2;
  o.adamw.weight_decay = 0.01;
  auto t = GrpoTrainer::Create(std::move(m), std::nullopt, o);
  EXPECT_TRUE(t.ok());
  return std::move(*t);
}

inline void TrainStep(GrpoTrainer* t, const std::vector<Group>& batch) {
  t->BeginStep();
  const Status st = t->Accumulate(batch);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto s = t->FinishStep();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
}

}  // namespace rl::train::grpo_fixture
