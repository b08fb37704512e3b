// A rollout group that re-forms in place (reforming_group.h), its ranks as threads: a follower
// that leaves (its group dropped, as a dead process's sockets close) and comes back as a new one,
// a leader that restarts with a fresh store, stop for a follower outside a group, and a follower
// that finds no leader. Real kills of real processes are in the bats drill (rl-rollout.bats).
#include "rl/dist/reforming_group.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "rl/dist/group_generate.h"
#include "rl/dist/test_ranks.h"
#include "rl/model/test_util.h"

namespace rl::dist {
namespace {

using model::Transformer;

struct Fixture {
  model::ModelConfig config = [] {
    model::ModelConfig c = model::testing::TinyConfig(model::Architecture::kQwen3, true, 2);
    c.max_position_embeddings = 48;
    return c;
  }();
  Transformer weights = [this] {
    auto m = Transformer::Create(config, 1);
    model::testing::RandomizeWeights(&*m, 1, 0.5);
    return std::move(*m);
  }();
  std::vector<std::vector<int64_t>> prompts = {{1, 2, 3}, {4}, {5, 6}, {7, 8, 9, 10}, {11}};
  model::GenerateOptions go = [] {
    model::GenerateOptions g;
    g.sampling.temperature = 0;  // greedy: the same responses alone or over the group
    g.max_new_tokens = 12;
    g.slots = 4;
    g.eos_id = 0;
    return g;
  }();
  std::vector<model::Generation> want = *model::Generate(weights, prompts, go);

  GroupOptions Base(int rank) const {
    GroupOptions o;
    o.endpoint = endpoint;
    o.rank = rank;
    o.size = 2;
    o.name = "rollout/test";
    o.timeout_ms = 20000;
    return o;
  }
  void ExpectWanted(Result<std::vector<model::Generation>> got, const char* when) const {
    ASSERT_TRUE(got.ok()) << when << ": " << got.status().ToString();
    ASSERT_EQ(got->size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ((*got)[i].response_ids, want[i].response_ids) << when;
  }
  Transformer Blank() const { return std::move(*Transformer::Create(config, 99)); }  // weights come from the leader

  std::string endpoint = "127.0.0.1:" + std::to_string(testing::FreePort());
};

void WaitFor(const std::atomic<bool>& flag) {
  for (int i = 0; i < 2000 && !flag; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(flag.load());
}

TEST(ReformingGroupTest, AFollowerThatDiesIsReplacedAndTheLeaderGeneratesAloneMeanwhile) {
  Fixture f;
  std::atomic<bool> died{false}, alone_done{false};
  Status first = Status::OK(), second = Status::Internal("not run");
  std::thread follower([&] {
    Transformer whole = f.Blank();
    // The first incarnation serves one batch, then leaves as a dead process does: its group
    // (its sockets) goes, and the loop ends with an error no rank would retry.
    GroupOptions short_lived = f.Base(1);
    short_lived.timeout_ms = 1000;  // its wait for a second request ends after a second
    first = FollowGroup(short_lived, 20000, [&](Group& g) {
      (void)RunGroupFollower(g, whole, {});
      return Status::Internal("died");
    });
    died = true;
    WaitFor(alone_done);
    Transformer again = f.Blank();  // a new process: a fresh model, weights again from the leader
    second = FollowGroup(f.Base(1), 20000, [&](Group& g) { return RunGroupFollower(g, again, {}); });
  });
  std::vector<std::string> changes;
  auto host = GroupHost::Start(f.Base(0), [&](const GroupChange& c) { changes.push_back(std::string(c.what) + std::to_string(c.epoch)); });
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  GroupLeader leader(host->get(), {});
  f.ExpectWanted(leader.Generate(f.weights, 1, f.prompts, f.go, nullptr), "over epoch 1");
  EXPECT_EQ((*host)->epoch(), 1);
  WaitFor(died);
  f.ExpectWanted(leader.Generate(f.weights, 1, f.prompts, f.go, nullptr), "alone, the follower dead");
  EXPECT_EQ((*host)->group(), nullptr);
  alone_done = true;
  // The new follower announces itself; the next batch forms epoch 2 and sends it the weights.
  Result<std::vector<model::Generation>> got = Status::Internal("not run");
  for (int i = 0; i < 200 && (*host)->epoch() < 2; ++i) {
    got = leader.Generate(f.weights, 1, f.prompts, f.go, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ((*host)->epoch(), 2);
  ASSERT_NE((*host)->group(), nullptr);
  f.ExpectWanted(leader.Generate(f.weights, 1, f.prompts, f.go, nullptr), "over epoch 2");
  EXPECT_NE((*host)->group(), nullptr) << "the batch ran over the re-formed group";
  EXPECT_TRUE(leader.Stop().ok());
  follower.join();
  EXPECT_EQ(first.code(), Code::kInternal);
  EXPECT_TRUE(second.ok()) << second.ToString();
  EXPECT_EQ(changes, (std::vector<std::string>{"formed1", "lost1", "formed2"}));
}

TEST(ReformingGroupTest, AFollowerRejoinsALeaderThatRestartedWithAFreshStore) {
  Fixture f;
  std::atomic<int> joined{0};
  Status follower_status = Status::Internal("not run");
  std::thread follower([&] {
    Transformer whole = f.Blank();
    follower_status = FollowGroup(f.Base(1), 20000, [&](Group& g) {
      ++joined;
      return RunGroupFollower(g, whole, {});
    });
  });
  {
    auto host = GroupHost::Start(f.Base(0));
    ASSERT_TRUE(host.ok()) << host.status().ToString();
    GroupLeader leader(host->get(), {});
    f.ExpectWanted(leader.Generate(f.weights, 1, f.prompts, f.go, nullptr), "the first leader");
  }  // the leader dies: its group and its store go, the follower stays
  auto host = GroupHost::Start(f.Base(0));  // on the same endpoint, epochs from 1 again
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  EXPECT_EQ((*host)->epoch(), 1);
  GroupLeader leader(host->get(), {});
  f.ExpectWanted(leader.Generate(f.weights, 1, f.prompts, f.go, nullptr), "the restarted leader");
  EXPECT_NE((*host)->group(), nullptr);
  EXPECT_TRUE(leader.Stop().ok());
  follower.join();
  EXPECT_TRUE(follower_status.ok()) << follower_status.ToString();
  EXPECT_EQ(joined.load(), 2) << "one process, two groups";
}

TEST(ReformingGroupTest, StopReachesAFollowerWaitingOutsideAGroup) {
  Fixture f;
  std::atomic<bool> waiting{false};
  Status follower_status = Status::Internal("not run");
  std::thread follower([&] {
    follower_status = FollowGroup(f.Base(1), 20000, [&](Group&) {
      waiting = true;
      return Status::Unavailable("a peer left");  // the group broke: it waits for the next epoch
    });
  });
  auto host = GroupHost::Start(f.Base(0));
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  WaitFor(waiting);
  GroupLeader leader(host->get(), {});
  (void)leader.Stop();
  follower.join();
  EXPECT_TRUE(follower_status.ok()) << follower_status.ToString();
}

TEST(ReformingGroupTest, AFollowerWithoutALeaderGivesUpAfterTheRejoinTimeout) {
  Fixture f;
  const auto start = std::chrono::steady_clock::now();
  Status s = FollowGroup(f.Base(1), 300, [](Group&) { return Status::OK(); });
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("rank 0 unreachable for 0.3 s"), std::string::npos) << s.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(FollowGroup(f.Base(0), 300, [](Group&) { return Status::OK(); }).code(), Code::kInvalidArgument);
}

// Between batches a follower waits on the group's idle channel: longer than the group's timeout
// (c10d's Gloo group would end that wait at its own timeout, whatever the call asks).
TEST(ReformingGroupTest, AFollowerWaitsForItsNextRequestLongerThanTheGroupsTimeout) {
  Fixture f;
  Status follower_status = Status::Internal("not run");
  std::thread follower([&] {
    GroupOptions o = f.Base(1);
    o.timeout_ms = 1000;
    o.idle_timeout_ms = 20000;
    Transformer whole = f.Blank();
    follower_status = FollowGroup(o, 20000, [&](Group& g) { return RunGroupFollower(g, whole, {}); });
  });
  GroupOptions o = f.Base(0);
  o.timeout_ms = 1000;
  o.idle_timeout_ms = 20000;
  auto host = GroupHost::Start(o);
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  GroupLeader leader(host->get(), {});
  f.ExpectWanted(leader.Generate(f.weights, 1, f.prompts, f.go, nullptr), "first");
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  f.ExpectWanted(leader.Generate(f.weights, 1, f.prompts, f.go, nullptr), "after 2.5 s idle");
  EXPECT_EQ((*host)->epoch(), 1) << "the group never broke";
  EXPECT_NE((*host)->group(), nullptr);
  EXPECT_TRUE(leader.Stop().ok());
  follower.join();
  EXPECT_TRUE(follower_status.ok()) << follower_status.ToString();
}

}  // namespace
}  // namespace rl::dist
