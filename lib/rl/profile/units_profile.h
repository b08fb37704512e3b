// rl-profile queue --units: rl-queue with its data on storage units (man/rl-profile.1, "queue";
// man/rl-queue.1, "STORAGE UNITS").
//
// For each unit count N it starts N `rl-queue unit` processes and a controller (`rl-queue serve
// --units`; N = 0: a plain server), runs the benchmark workload (workload.h) with rows of
// `fields` int32 tensors of `tokens` tokens each (the first carries the put time), and reads the
// CPU time (/proc/PID/stat) the controller and the units spent. From the CPU seconds per row of
// the controller and of the units it derives how many units one controller serves before it is
// the bottleneck: a unit's CPU per row over the controller's (each row's data is on one unit).
// Thread safety: call from one thread; it starts and joins its own.
#pragma once

#include <atomic>
#include <ostream>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/profile/workload.h"

namespace rl::profile {

struct UnitsProfileOptions {
  Workload workload;              // producers, consumers, batch, rows (row_bytes is 4 * tokens)
  std::vector<int> units = {0, 1, 2, 4};
  int fields = 10;
  int tokens = 8192;
  std::string fsync = "batch";
  bool json = false;
  const std::atomic<bool>* stop = nullptr;
};

struct UnitsFigure {
  int units = 0;
  double rows_per_s = 0;       // end to end (the workload's pipeline phase)
  double put_rows_per_s = 0, get_rows_per_s = 0;
  uint64_t rows = 0;           // over the whole run
  double controller_cpu_us = 0;  // per row
  double unit_cpu_us = 0;        // per row, all units together
  bool exactly_once = false;
};

// Rows per producer when Workload::rows is 0: about 128 MiB of data per pass, at least 2 batches.
uint64_t UnitsDefaultRows(const UnitsProfileOptions& o);

Result<std::vector<UnitsFigure>> RunUnitsProfile(const UnitsProfileOptions& options, std::ostream& out);

}  // namespace rl::profile
