// rl-profile weights: how fast weight bundles move, against baselines measured in the same run.
//
//   bandwidth  for each transport (UCX_TLS value) and bundle size: our pull's GB/s, ucx_perftest's
//              GB/s for the operation our pull uses on that transport (a child process pair, one
//              message of the bundle's size, run right after each of our pulls), and a plain
//              memcpy of the same size; printed with ours/memcpy and ours/perftest, the median of
//              the back-to-back pairs' ratios (the load of a shared machine moves between runs).
//              Every pull fetches a version published just before it, as in training; a warm-up
//              pull comes first (perftest warms up too) and is printed apart, not counted.
//   ops        ucx_perftest's GB/s for put, get and tagged sends at the chunk size on each
//              transport: the measurement behind the choice of operation (puller.h).
//   fanout     seconds from publish until N rollouts applied the new version (verified, copied
//              into memory of their own as decoding does), all pulling over tcp from the trainer,
//              and through one relay on the rollouts' host that pulls once and lets them map it;
//              with the ratio to the first N; the second version a fleet serves, and the first
//              beside it (weights_fanout.cc).
//   bandwidth also runs perftest with -e (error mode PEER, as our sources use) over tcp.
// Thread safety: run from one thread.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/profile/cli.h"
#include "rl/weights/bundle.h"

namespace rl::profile {

struct WeightsProfileOptions {
  std::string sizes = "10M,100M,1G";
  std::string transports = "tcp,sm";
  std::string pullers = "1,2,4,8";
  uint32_t chunk_size = 4u << 20;
  int runs = 3;
  bool json = false;
};

// Binds the options of `rl-profile weights` and returns its entry for ProfileMain's list.
Subcommand AddWeightsProfile(CommandLine& cl, WeightsProfileOptions* options);
Status RunWeightsProfile(const WeightsProfileOptions& options, std::ostream& out);

// One ucx_perftest measurement: a server and a client process on 127.0.0.1 with UCX_TLS=tls,
// warmed up twice (-w 2), with UCX's defaults; peer_failure adds -e (endpoints in error mode
// PEER, as our sources' are). Returns GB/s (10^9 bytes) of its "overall" bandwidth.
Result<double> PerftestGBps(const std::string& tls, const std::string& test, size_t message_bytes, size_t iterations,
                            bool peer_failure = false);

// A bundle of `size` bytes (at least a small header's) for the measurements: a safetensors frame
// around a cheap pattern that depends on `version`.
Result<weights::Bundle> MakeBundle(uint64_t version, size_t size, uint32_t chunk_size);

// "100M" -> 104857600 (K, M, G: powers of 1024).
Result<size_t> ParseBytes(const std::string& s);

}  // namespace rl::profile
