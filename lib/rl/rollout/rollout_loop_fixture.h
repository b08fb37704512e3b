// The fixture of the rollout loop's tests (rollout_loop_test.cc, rollout_refill_test.cc): a queue
// in-process with tasks generate and reward, weights version 1 in a checkpoint directory.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rl/core/clock.h"
#include "rl/model/tokenizer.h"
#include "rl/queue/test_queue.h"
#include "rl/rollout/rollout_loop.h"
#include "rl/rollout/test_model.h"

namespace rl::rollout {

using rl::testing::TestQueue;

class RolloutLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TestDir("ckpt");
    testing::WriteWeights(dir_, 1, 5);
    queue_ = std::make_unique<TestQueue>(std::vector<queue::DeclareRequest>{
        {"generate", {"prompt_ids"}}, {"reward", {"prompt", "response", "answer"}}});
  }
  void TearDown() override {
    queue_.reset();
    std::filesystem::remove_all(dir_);
  }

  // `groups` prompts, each as `g` rows sharing a group, as a trainer feeds them.
  void PutPrompts(int groups, int g, int first_group = 0) {
    model::CharTokenizer tok;
    queue::PutRequest put;
    for (int i = 0; i < groups; ++i) {
      std::string prompt = std::to_string(100 + i) + "+" + std::to_string(200 + i) + "=";
      std::vector<int64_t> ids = {tok.bos_id()};
      auto enc = tok.Encode(prompt);
      ASSERT_TRUE(enc.ok());
      ids.insert(ids.end(), enc->begin(), enc->end());
      for (int k = 0; k < g; ++k) {
        put.rows.push_back({std::nullopt, {{"prompt", prompt}, {"answer", std::to_string(300 + 2 * i)},
                                           {"prompt_ids", Tensor::FromI64(ids)},
                                           {"group", static_cast<int64_t>(first_group + i)}}});
      }
    }
    auto done = queue_->Client().Put(put);
    ASSERT_TRUE(done.ok()) << done.status().ToString();
  }

  RolloutOptions Options() const {
    RolloutOptions o;
    o.model = &testing::DemoModelDir();
    o.client = queue_->Options();
    o.checkpoint_dir = dir_;
    o.count = 8;
    o.wait_ms = 100;
    o.progress_ms = 0;
    o.generate.max_new_tokens = 6;
    o.generate.slots = 8;
    return o;
  }

  // The loop on a thread of its own, until Stop.
  struct Running {
    std::atomic<bool> stop{false};
    RolloutStats stats;
    Policy policy;
    Status result;
    std::thread thread;
  };
  // REQUIRES: o outlives Stop (the loop reads it on its thread).
  std::unique_ptr<Running> Start(const RolloutOptions& o) {
    auto r = std::make_unique<Running>();
    Running* p = r.get();
    p->thread = std::thread([p, &o] { p->result = RunRollout(o, &p->policy, p->stop, &p->stats); });
    return r;
  }
  // Waits until task generate has consumed `rows` rows, or 30 s have passed.
  void WaitConsumed(uint64_t rows, int poll_ms = 50) {
    const int64_t deadline = MonoMillis() + 30000;
    while (queue_->Task("generate")["consumed"].get<uint64_t>() < rows && MonoMillis() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
    }
  }
  RolloutStats Stop(Running* r) {
    r->stop = true;
    r->thread.join();
    EXPECT_TRUE(r->result.ok()) << r->result.ToString();
    return r->stats;
  }

  // Runs the loop until task generate has consumed `rows` rows (or 30 s pass).
  RolloutStats RunUntilConsumed(uint64_t rows, const RolloutOptions& o) {
    auto r = Start(o);
    WaitConsumed(rows);
    return Stop(r.get());
  }

  // Every row as task reward sees it.
  std::vector<queue::GotRow> RewardRows(uint32_t n) {
    queue::GetRequest g;
    g.task = "reward";
    g.count = n;
    g.wait_ms = 1000;
    auto got = queue_->Client().Get(g);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    return got.ok() ? got->rows : std::vector<queue::GotRow>();
  }

  std::string dir_;
  std::unique_ptr<TestQueue> queue_;
};

}  // namespace rl::rollout
