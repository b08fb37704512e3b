// Real UCX transfers between a source and a puller in one process (separate contexts and
// workers, as in two processes), over tcp on 127.0.0.1 and over shared memory. Failures are made
// by hooks at chunk boundaries, never by timing, so the outcome does not depend on the machine.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "rl/weights/puller.h"
#include "rl/weights/source.h"
#include "rl/weights/test_util.h"
#include "rl/wire/client.h"

namespace rl::weights {
namespace {

using testing::FakeWeights;

constexpr uint32_t kChunk = 64 << 10;

class TransferTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::shared_ptr<UcxContext> Context() {
    auto c = UcxContext::Create(GetParam());
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? *c : nullptr;
  }
  std::unique_ptr<Source> StartSource(const Bundle* b, uint32_t max_pulls = 4, const std::string& bind = "") {
    SourceOptions o;
    if (!bind.empty()) o.bind = bind;
    o.max_pulls = max_pulls;
    auto s = Source::Start(Context(), o);
    // A source restarted on the endpoint it just closed: ZeroMQ's reaper thread lets go of the
    // port a moment after the socket closed (bounded: 2 s).
    for (int i = 0; i < 200 && !bind.empty() && !s.ok() &&
                    s.status().message().find("already in use") != std::string::npos;
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      s = Source::Start(Context(), o);
    }
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return nullptr;
    if (b) {
      EXPECT_TRUE((*s)->Publish(*b).ok());
    }
    return std::move(*s);
  }
  std::unique_ptr<Puller> MakePuller() {
    auto p = Puller::Create(Context(), "test");
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? std::move(*p) : nullptr;
  }
  static PullOptions Options(std::vector<std::string> sources) {
    PullOptions o;
    o.sources = std::move(sources);
    o.stall_ms = 1000;
    o.request_ms = 500;
    o.give_up_s = 30;
    return o;
  }
  static Bundle Make(uint64_t version, size_t size, uint64_t seed) {
    auto b = Bundle::FromString(version, FakeWeights(size, seed), kChunk);
    EXPECT_TRUE(b.ok());
    return *b;
  }
  static void ExpectSame(const Bundle& got, const Bundle& want) {
    EXPECT_EQ(got.version, want.version);
    EXPECT_EQ(got.digest(), want.digest());
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(std::memcmp(got.data(), want.data(), want.size()) == 0);
    EXPECT_TRUE(got.Verify().ok());
  }
};

TEST_P(TransferTest, PullerGetsTheNewestVersionWhole) {
  Bundle v1 = Make(1, 1 << 20, 1), v2 = Make(2, 1 << 20, 2);
  auto a = StartSource(&v1);
  auto b = StartSource(&v2);
  auto p = MakePuller();
  PullReport r;
  auto got = p->Pull(Options({a->endpoint(), b->endpoint()}), &r);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSame(*got, v2);
  EXPECT_EQ(r.source, b->endpoint());
  EXPECT_EQ(r.failovers, 0);
  EXPECT_EQ(b->pulls_served(), 1u);
}

TEST_P(TransferTest, CorruptChunkIsCaughtAndFetchedAgain) {
  Bundle v = Make(5, 1 << 20, 3);
  auto a = StartSource(&v);
  auto p = MakePuller();
  PullOptions o = Options({a->endpoint()});
  int corrupted = 0;
  o.on_chunk = [&](size_t chunk, char* data, size_t) {
    if (chunk == 2 && corrupted++ == 0) data[17] ^= 0x40;
  };
  PullReport r;
  auto got = p->Pull(o, &r);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSame(*got, v);
  EXPECT_EQ(r.refetched, 1);
  EXPECT_EQ(corrupted, 2);  // the bad arrival and the good one
}

TEST_P(TransferTest, SourceDiesMidPullAndThePullerFinishesFromAnother) {
  Bundle v = Make(3, 2 << 20, 4);
  auto a = StartSource(&v), b = StartSource(&v);
  std::string a_ep = a->endpoint(), b_ep = b->endpoint();
  auto p = MakePuller();
  PullOptions o = Options({a_ep, b_ep});
  o.inflight = 2;  // chunks still to ask for when the source dies (by default all are asked for at once)
  int arrived = 0;
  o.on_chunk = [&](size_t, char*, size_t) {
    if (++arrived != 4) return;
    // Kill whichever source granted the lease: its thread, worker and memory go away.
    if (a && a->active() > 0) a.reset(); else b.reset();
  };
  PullReport r;
  auto got = p->Pull(o, &r);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSame(*got, v);
  EXPECT_TRUE(a == nullptr || b == nullptr);
  // Over tcp the survivor sent the rest. A shared-memory mapping outlives its source, so there
  // the copy may finish from the dead source's pages (still checked chunk by chunk).
  if (GetParam() == "tcp") {
    EXPECT_EQ(r.source, a ? a_ep : b_ep);
  }
}

TEST_P(TransferTest, BusySourceSendsThePullerToAnother) {
  Bundle v = Make(2, 256 << 10, 5);
  auto a = StartSource(&v, 1), b = StartSource(&v, 1);
  // Hold a's only lease with a bare open request.
  ClientOptions co;
  co.endpoint = a->endpoint();
  Client c(co);
  ASSERT_TRUE(c.Call(kOpOpen, EncodeOpenRequest(2)).ok());
  auto p = MakePuller();
  PullReport r;
  auto got = p->Pull(Options({a->endpoint(), b->endpoint()}), &r);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSame(*got, v);
  EXPECT_EQ(r.source, b->endpoint());
}

TEST_P(TransferTest, TrainerDiesWhileBeingPulledAndThePullerTakesItsRestartedVersion) {
  Bundle v1 = Make(1, 1 << 20, 6), v2 = Make(2, 1 << 20, 7);
  auto a = StartSource(&v1);
  std::string ep = a->endpoint();
  auto p = MakePuller();
  PullOptions o = Options({ep});
  o.inflight = 2;  // chunks still to ask for when the trainer dies
  int arrived = 0;
  o.on_chunk = [&](size_t, char*, size_t) {
    if (++arrived != 3) return;
    a.reset();                    // the trainer dies with version 1 half pulled
    a = StartSource(&v2, 4, ep);  // and comes back on the same endpoint with version 2
  };
  PullReport r;
  auto got = p->Pull(o, &r);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  if (GetParam() == "tcp") {
    ExpectSame(*got, v2);
    EXPECT_EQ(r.restarts, 1);
  } else {
    ExpectSame(*got, r.restarts ? v2 : v1);  // a mapping may let version 1 finish: whole either way
  }
}

TEST_P(TransferTest, ASourceThatOnlySendsCorruptChunksYieldsNoBundle) {
  Bundle v = Make(1, 256 << 10, 8);
  auto a = StartSource(&v);
  auto p = MakePuller();
  PullOptions o = Options({a->endpoint()});
  o.give_up_s = 1;
  o.on_chunk = [](size_t chunk, char* data, size_t) {
    if (chunk == 1) data[0] ^= 1;
  };
  auto got = p->Pull(o);
  EXPECT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kUnavailable) << got.status().ToString();
  EXPECT_NE(got.status().message().find("corrupt"), std::string::npos) << got.status().message();
}

TEST_P(TransferTest, PulledBundleIsServedOnAfterItsSourceIsGone) {
  Bundle v = Make(4, 1 << 20, 9);
  auto trainer = StartSource(&v);
  auto ctx = Context();
  auto relay = Source::Start(ctx, SourceOptions());
  ASSERT_TRUE(relay.ok());
  auto p = Puller::Create(ctx, "relay");
  ASSERT_TRUE(p.ok());
  auto got = (*p)->Pull(Options({trainer->endpoint()}));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE((*relay)->Publish(*got).ok());
  trainer.reset();
  auto q = MakePuller();
  auto again = q->Pull(Options({(*relay)->endpoint()}));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ExpectSame(*again, v);
}

TEST_P(TransferTest, ABundleItsCallerDroppedTakesTheNextVersion) {
  Bundle v1 = Make(1, 1 << 20, 11), v2 = Make(2, 1 << 20, 12);
  auto a = StartSource(&v1);
  auto p = MakePuller();
  const char* first = nullptr;
  {
    auto got = p->Pull(Options({a->endpoint()}));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectSame(*got, v1);
    first = got->data();
  }
  ASSERT_TRUE(a->Publish(v2).ok());
  PullOptions o = Options({a->endpoint()});
  o.min_version = 2;
  auto got = p->Pull(o);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSame(*got, v2);
  // Over tcp the bytes land in the buffer v1 no longer needs; a mapping is the source's memfd.
  if (GetParam() == "tcp") {
    EXPECT_EQ(got->data(), first);
  }
}

TEST_P(TransferTest, ABundleItsCallerHoldsIsNeverWrittenByLaterPulls) {
  Bundle v[4] = {Make(1, 1 << 20, 13), Make(2, 1 << 20, 14), Make(3, 1 << 20, 15), Make(4, 1 << 20, 16)};
  auto a = StartSource(&v[0]);
  auto p = MakePuller();
  auto held = p->Pull(Options({a->endpoint()}));
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  for (int i = 1; i < 4; ++i) {
    ASSERT_TRUE(a->Publish(v[i]).ok());
    PullOptions o = Options({a->endpoint()});
    o.min_version = v[i].version;
    auto got = p->Pull(o);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectSame(*got, v[i]);
    EXPECT_NE(got->data(), held->data());
  }
  ExpectSame(*held, v[0]);
}

INSTANTIATE_TEST_SUITE_P(Transports, TransferTest, ::testing::Values("tcp", "sm"),
                         [](const auto& info) { return info.param == "sm" ? std::string("shm") : info.param; });

TEST(TransferStallTest, StalledSourceIsLeftForAnother) {
  // Over tcp a get needs the source's progress: a paused source stalls the pull.
  auto ctx = [] { return *UcxContext::Create("tcp"); };
  auto v = Bundle::FromString(1, FakeWeights(1 << 20, 10), kChunk);
  ASSERT_TRUE(v.ok());
  auto a = Source::Start(ctx(), SourceOptions()), b = Source::Start(ctx(), SourceOptions());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Publish(*v).ok() && (*b)->Publish(*v).ok());
  auto p = Puller::Create(ctx(), "test");
  ASSERT_TRUE(p.ok());
  PullOptions o;
  o.sources = {(*a)->endpoint(), (*b)->endpoint()};
  o.stall_ms = 300;
  o.inflight = 1;
  int arrived = 0;
  o.on_chunk = [&](size_t, char*, size_t) {
    if (++arrived == 2) ((*a)->active() > 0 ? *a : *b)->SetPaused(true);
  };
  PullReport r;
  auto got = (*p)->Pull(o, &r);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->digest(), v->digest());
  EXPECT_GE(r.failovers, 1);
  (*a)->SetPaused(false);
  (*b)->SetPaused(false);
  // The stalled source's lease still has sends in flight; the same puller pulls from it again.
  for (auto* s : {&*a, &*b}) {
    PullOptions again;
    again.sources = {(*s)->endpoint()};
    again.stall_ms = 2000;
    auto more = (*p)->Pull(again);
    ASSERT_TRUE(more.ok()) << more.status().ToString();
    EXPECT_EQ(more->digest(), v->digest());
  }
}

}  // namespace
}  // namespace rl::weights
