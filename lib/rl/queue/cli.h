// rl-queue's command line: the subcommands serve, put, get, ack, nack, stat, meta, task and retire.
// QueueMain parses argv through the option registry and runs one subcommand; it returns the
// process exit code (sysexits). The Run* functions are the subcommands, for tests and tools.
#pragma once

#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "rl/queue/client.h"
#include "rl/queue/server.h"

namespace rl::queue {

struct ClientFlags {
  std::string connect = "tcp://127.0.0.1:5555";
  double timeout_s = 60;
  ClientOptions ToOptions() const;
};

struct PutFlags {
  size_t batch = 64;
  uint32_t repeat = 1;
  std::string update;  // --update TASK:LEASE ("" when not an update)
  double renew_s = 0;  // --renew
  int window = 8;      // --window: puts in flight at once
};

int QueueMain(int argc, char** argv);

int RunServe(ServerOptions options, const std::string& run_dir, const std::string& id);
int RunPut(const ClientFlags& c, const PutFlags& f, std::istream& in, std::ostream& out);
int RunGet(const ClientFlags& c, GetRequest req, std::ostream& out);
// nack --holder: gives back every lease the holder has on the task; prints the rows released.
int RunReleaseHolder(const ClientFlags& c, const std::string& task, const std::string& holder, uint64_t lease,
                     const std::vector<std::string>& indices, std::ostream& out);
int RunAckOrNack(const ClientFlags& c, bool ack, const std::string& task, uint64_t lease,
                 std::vector<std::string> indices, std::istream& in, std::ostream& out);
int RunStat(const ClientFlags& c, bool json, std::ostream& out);
int RunMeta(const ClientFlags& c, const std::vector<std::string>& args, const std::string& if_equals,
            bool has_if_equals, std::ostream& out);
int RunTask(const ClientFlags& c, const std::string& task, const std::vector<std::string>& columns, bool optional);
int RunRetire(const ClientFlags& c, const std::string& task, std::ostream& out);

// "a,b,,c" -> {"a", "b", "c"}
std::vector<std::string> SplitList(const std::string& s);
// Prints "rl-queue: <message>" on stderr and returns the exit code for `s`.
int Fail(const Status& s);

}  // namespace rl::queue
