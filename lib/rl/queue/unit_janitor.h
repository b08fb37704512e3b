// UnitJanitor: a controller's thread that frees the unit rows of its storage units that no row
// of the queue refers to (docs/design.md "Storage units", "Garbage").
//
// - Released rows: the server hands over the unit rows its rows stopped referring to (a row
//   freed, a column replaced by an update, a regeneration) once the log holds the record that
//   released them; the janitor frees them on their units at once.
// - Orphans: every `interval_ms` it lists each unit's rows staged at least `grace_ms` ago (by
//   the unit's clock), asks the controller which of them its rows refer to (held), and frees the
//   rest: rows a client staged and then never referred to (it died before its put, or its put
//   was refused), and rows released while the controller was down.
// It talks to the units and to its own controller as an ordinary client. A unit that does not
// answer is tried again at the next pass; the rows wait.
// Thread safety: Release from any thread; the rest is the janitor's own thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rl::queue {

struct JanitorOptions {
  std::vector<std::string> units;  // endpoints, in the controller's order
  std::string controller;          // the controller's own endpoint
  int64_t grace_ms = 60000;
  int64_t interval_ms = 15000;     // between reconciliations
  double give_up_s = 5;            // per call: a dead unit holds the janitor no longer than this
};

class UnitJanitor {
 public:
  explicit UnitJanitor(JanitorOptions options);  // starts the thread
  ~UnitJanitor();                                // stops it
  UnitJanitor(const UnitJanitor&) = delete;
  UnitJanitor& operator=(const UnitJanitor&) = delete;

  // Unit rows (UnitKey) to free: no row refers to them, and the log says so.
  void Release(std::vector<uint64_t> keys);
  // Unit rows freed so far (released and orphans), for tests and stat.
  uint64_t freed() const { return freed_.load(); }
  uint64_t passes() const { return passes_.load(); }  // reconciliations done

 private:
  void Loop();

  JanitorOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint64_t> released_;  // guarded by mu_
  bool stop_ = false;               // guarded by mu_
  std::atomic<uint64_t> freed_{0}, passes_{0};
  std::atomic<bool> halt_{false};  // the calls' stop flag
  std::thread thread_;
};

}  // namespace rl::queue
