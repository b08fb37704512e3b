// The feeder against a real rl-queue server in a thread: each prompt group is added once even
// when the feeder is "restarted" between its put and its cursor update.
#include "rl/train/feeder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "rl/model/test_util.h"
#include "rl/queue/server.h"
#include "rl/task/addition.h"

namespace rl::train {
namespace {

class FeederTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/rl-feeder-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    queue::ServerOptions o;
    o.bind = "tcp://127.0.0.1:0";
    o.dir = dir_;
    o.declare = {{"generate", {"prompt_ids"}},
                 {"look", {"prompt", "answer", "prompt_ids"}},  // a get returns only its task's columns
                 {"train", {"prompt_ids", "response_ids", "logprobs", "reward", "version"}}};
    auto s = queue::Server::Open(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    thread_ = std::thread([this] { EXPECT_TRUE(server_->Run(stop_).ok()); });
    std::ofstream data(dir_ + "/prompts.jsonl");
    for (const task::Problem& p : task::MakeProblems(5, 7)) {
      data << nlohmann::json{{"prompt", p.prompt}, {"answer", p.answer}}.dump() << "\n";
    }
  }
  void TearDown() override {
    stop_ = true;
    thread_.join();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  ClientOptions Options(const std::string& sender) {
    ClientOptions o;
    o.endpoint = server_->endpoint();
    o.sender = sender;
    o.give_up_s = 10;
    return o;
  }
  // A feeder process as it would start: a new object with the stable sender id.
  std::unique_ptr<Feeder> Start() {
    static const auto encoder = std::make_shared<const model::PromptEncoder>(
        model::PromptEncoder::Create(model::OpenModelDir(model::testing::DemoDir()).value(), "auto").value());
    auto source = PromptSource::Open(dir_ + "/prompts.jsonl", task::DatasetOptions{}, encoder);
    EXPECT_TRUE(source.ok()) << source.status().ToString();
    return std::make_unique<Feeder>(Options("rl-train-feeder:test"), std::move(*source), kG);
  }
  uint64_t Rows() {
    queue::QueueClient c(Options(""));
    return c.Stat().value()["rows"].get<uint64_t>();
  }
  static constexpr int64_t kG = 4;
  std::string dir_;
  std::unique_ptr<queue::Server> server_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(FeederTest, PutsGroupsOfGRowsWithTheContractColumns) {
  auto f = Start();
  auto added = f->FeedTo(3, 2);
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(*added, 3);
  EXPECT_EQ(Rows(), 3u * kG);
  EXPECT_EQ(f->Cursor().value(), 3u);
  queue::QueueClient c(Options(""));
  EXPECT_EQ(c.MetaGet(kCursorKey).value(), std::optional<std::string>("3"));
  queue::GetRequest g;
  g.task = "look";
  g.count = 100;
  g.groups = true;
  auto got = c.Get(g);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->rows.size(), 3u * kG);
  std::vector<task::Problem> p = task::MakeProblems(5, 7);
  const auto& cols = got->rows[kG].columns;  // the second group
  auto col = [&](const std::string& name) -> const Value& {
    for (const auto& [n, v] : cols) if (n == name) return v;
    ADD_FAILURE() << "no column " << name;
    return cols[0].second;
  };
  EXPECT_EQ(std::get<std::string>(col("prompt")), p[1].prompt);
  EXPECT_EQ(std::get<std::string>(col("answer")), p[1].answer);
  EXPECT_EQ(std::get<int64_t>(col("group")), 1);
  EXPECT_EQ(std::get<Tensor>(col("prompt_ids")).ToI64().front(), 1) << "prompt_ids start with <bos>";
  EXPECT_EQ(RowsInFlight(&c).value(), 3u * kG);
}

TEST_F(FeederTest, RestartBetweenPutAndCursorUpdateAddsEachGroupOnce) {
  {
    auto f = Start();
    auto put = f->PutGroups(2);
    ASSERT_TRUE(put.ok());
    EXPECT_EQ(*put, 2);
    // killed here: the rows are in, the cursor still says 0
  }
  EXPECT_EQ(Rows(), 2u * kG);
  auto f = Start();
  auto again = f->PutGroups(3);  // a different size this time: the first put's effect wins
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 2);
  ASSERT_TRUE(f->AdvanceCursor(*again).ok());
  EXPECT_EQ(Rows(), 2u * kG) << "the repeated put added nothing";
  EXPECT_EQ(f->Cursor().value(), 2u);
  auto next = f->PutGroups(1);
  ASSERT_TRUE(next.ok());
  ASSERT_TRUE(f->AdvanceCursor(*next).ok());
  EXPECT_EQ(Rows(), 3u * kG);
  EXPECT_EQ(Start()->Cursor().value(), 3u);
}

TEST_F(FeederTest, FeedToCountsRowsStillInFlight) {
  auto f = Start();
  ASSERT_EQ(f->FeedTo(2, 8).value(), 2);
  EXPECT_EQ(f->FeedTo(2, 8).value(), 0) << "two groups are already waiting for generation";
  EXPECT_EQ(f->FeedTo(6, 3).value(), 4);
  EXPECT_EQ(Rows(), 6u * kG);
  EXPECT_EQ(f->Cursor().value(), 6u);
}

}  // namespace
}  // namespace rl::train
