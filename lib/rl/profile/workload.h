// The benchmark workload, the same for every system under test:
//
//   1. put:      P producers each put `rows` rows, `batch` rows per request.
//   2. get:      C consumers take those rows, up to `batch` per request, holding them.
//   3. ack:      each consumer acks what it took, one request per get, one at a time; with an
//                ack_window above 1, only the first half of its gets so, and the second half with
//                up to ack_window acks in flight (ack-pipelined).
//   4. pipeline: P producers put `rows` rows each again while C consumers get (waiting up to
//                pipeline_wait_ms for rows) and ack at once; end to end is rows put / time to the
//                last ack, and each row's latency runs from its put being sent to its ack returning.
//
// Every phase is bounded by phase_limit_s; a phase that runs out stops and the run is marked
// timed_out. The run also checks that every row was consumed exactly once.
// Thread safety: RunWorkload starts and joins its own threads; call it from one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "rl/profile/driver.h"
#include "rl/profile/percentile.h"

namespace rl::profile {

struct Workload {
  int producers = 2;
  int consumers = 2;
  uint64_t rows = 4096;       // per producer, per pass (there are two passes: phases 1-3 and 4)
  size_t row_bytes = 1024;    // payload bytes per row, at least 8
  size_t batch = 64;          // rows per put and per get
  double phase_limit_s = 30;  // wall-time bound of each phase
  int pipeline_wait_ms = 20;  // how long a pipeline get may wait for rows
  int ack_window = 1;         // above 1: half the ack phase pipelined with this many acks in flight
  const std::atomic<bool>* stop = nullptr;  // when set and true, the run ends early (a signal)
};

struct WorkloadRun {
  OpFigure put, get, ack, e2e;
  OpFigure ack_pipelined;    // rows 0 unless ack_window > 1
  uint64_t expected = 0;     // rows put over both passes
  uint64_t consumed = 0;     // distinct rows acked
  uint64_t duplicates = 0;   // acks of a row already acked
  bool timed_out = false;    // a phase hit phase_limit_s
  bool ExactlyOnce() const { return !timed_out && consumed == expected && duplicates == 0; }
};

// Called with the name of each phase as it starts.
using ProgressFn = std::function<void(const std::string& phase)>;

// Runs the four phases with drivers made by `make`: producers are clients 0..P-1, consumers P..P+C-1.
// Timeout when *w.stop became true.
Result<WorkloadRun> RunWorkload(const DriverFactory& make, const Workload& w, const ProgressFn& progress);

}  // namespace rl::profile
