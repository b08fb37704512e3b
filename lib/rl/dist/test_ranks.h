// Test helper (not part of the library): the ranks of a process group as threads of the test,
// each with its own Gloo group over 127.0.0.1.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "rl/dist/group.h"
#include "rl/model/device.h"

namespace rl::dist::testing {

// A TCP port that was free a moment ago, for the rendezvous store.
inline int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// The CUDA devices this process sees (up to 8): GPU tests skip below what they need.
inline int VisibleGpus() {
  int n = 0;
  while (n < 8 && model::CheckDevice(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(n))).ok()) ++n;
  return n;
}

#define RL_REQUIRE_GPUS(n)                                                                        \
  if (::rl::dist::testing::VisibleGpus() < (n))                                                  \
  GTEST_SKIP() << "needs " << (n) << " CUDA device(s), " << ::rl::dist::testing::VisibleGpus() << " visible"

// Runs body(group) on `size` threads, one rank each, and waits for them. gpu_of(rank): the GPU
// that rank's collectives carry tensors on (GroupOptions::gpu); none by default.
inline void RunRanks(int size, const std::function<void(Group&)>& body,
                     const std::function<int(int)>& gpu_of = nullptr) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(FreePort());
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      GroupOptions o;
      o.endpoint = endpoint;
      o.rank = r;
      o.size = size;
      o.timeout_ms = 20000;
      if (gpu_of) o.gpu = gpu_of(r);
      auto group = Group::Join(o);
      ASSERT_TRUE(group.ok()) << group.status().ToString();
      body(*group);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace rl::dist::testing
