// EnvClient: how a rollout (or anything in C++) runs tool calls on rl-env.
//
//   rl::ClientOptions o;
//   o.endpoint = "tcp://127.0.0.1:5570";
//   o.give_up_s = 60;
//   rl::env::EnvClient env(o, 10000);                    // rl-env's --timeout-ms
//   auto results = env.Call({{"calc", "\"12*34\""}});   // (*results)[0].output == "408"
//
// One request carries the calls (several, one after another, past rl-env's per-request limits);
// rl-env runs them in parallel and answers when all are done, results in the order of the calls.
// A failed call (timeout, crash, ...) is a result with ok = false, an error and a kind
// (rl/env/protocol.h), never an error Status: Call fails only when
// rl-env stays unreachable past the client's give_up_s (Unavailable) or the request is refused
// (Protocol, InvalidArgument). The wire Client retries with the same rid through rl-env restarts,
// and rl-env runs a retried request's calls once while its first run is in progress or was the
// sender's last (a restarted rl-env runs them again).
// Each attempt waits for the calls' run time as well, so the first Call, and the first after a
// failed one, pings rl-env first: one that is not there is reported after give_up_s. One that
// goes away during a Call is reported after give_up_s plus the calls' time.
// Thread safety: one EnvClient per thread (as rl/wire/client.h).
#pragma once

#include <cstdint>
#include <vector>

#include "rl/env/protocol.h"
#include "rl/wire/client.h"

namespace rl::env {

class EnvClient {
 public:
  // call_timeout_ms: how long one call may run on rl-env (its --timeout-ms); each attempt waits
  // for the calls' run time on top of options.attempt_timeout_ms.
  EnvClient(ClientOptions options, int64_t call_timeout_ms);
  // Runs the calls (in parallel on rl-env), results in the same order. Retries through rl-env
  // restarts with the same rid (the wire Client does this); an error only when rl-env stays
  // unreachable past the client's give-up time.
  // More than kMaxCallsPerRequest calls, or more than kRequestBytes of them, go in several
  // requests, one after another.
  Result<std::vector<ToolResult>> Call(const std::vector<ToolCall>& calls);
  // What one request carries at most, in call bytes: a quarter of rl-env's default --max-message.
  static constexpr size_t kRequestBytes = size_t{16} << 20;
  // The server's wall time of the last successful Call, in seconds (its requests' summed).
  double last_seconds() const { return last_seconds_; }
  Client& wire() { return client_; }

 private:
  Result<std::vector<ToolResult>> CallOnce(const std::vector<ToolCall>& calls);  // one request

  Client client_;
  int64_t call_timeout_ms_;
  bool reached_ = false;  // rl-env answered the last exchange
  double last_seconds_ = 0;
};

}  // namespace rl::env
