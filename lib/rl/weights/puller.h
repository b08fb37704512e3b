// Puller: fetches the newest weight bundle from any live source (rl-train, rl-relay, rl-rollout).
//
// It asks every source what it holds (protocol.h "info"), takes the newest version, and reads it
// in chunks from the least busy source that grants it a lease, the others in random order so
// pullers spread. It records which chunks it holds and checks each against its CRC-32C as it
// arrives (a bad chunk is fetched again; a source that keeps sending bad chunks is left). When the
// source dies or stalls (no chunk for stall_ms), the puller goes on from another source holding
// the same version and digest, keeping the chunks it has. When no source holds that version any
// more (the trainer died while being pulled), the partial bundle is dropped and the puller takes
// the newest version anyone has. Only a bundle whose every chunk was verified, and whose table
// matches its digest, is returned: nothing partial is ever handed out.
//
// Which way, by measurement on this machine (rl-profile weights prints the figures in the same
// run as ucx_perftest's):
//   - same host: the source's bundle is a sealed memfd (shared_bytes.h). The puller maps it
//     read-only and checks every chunk's CRC in place (ChunkCrc, one read of the bundle, on
//     verify_threads threads); the bundle it returns is that mapping, with no copy. Of the
//     CPU time, ~8 ms per 100 MB is the CRC and ~10 ms mapping the 4 KiB pages in (this
//     kernel gives shmem no huge pages): work two threads halve when the cores are free.
//     ucx_perftest's get over shared memory copies the bytes (a read and a write), so this
//     runs at or above its speed (1.2-1.9 times, 100 MB and 1 GB); copying out of
//     a UCX mapping into fresh memory first, then checking twice, ran at a tenth of it. The
//     mapping cannot fail or stall when the source dies: its pages stay while they are mapped.
//   - tcp (other hosts, or UCX_TLS without shared memory): the source sends chunks as tagged
//     messages. A put over tcp is emulated and ran ~40 MB/s against ~1 GB/s for tagged sends;
//     a get over tcp is emulated too, by the source's progress thread, and UCX 1.13 aborts the
//     source when a puller dies during one (ucp_get_req_handler: "unexpected error"), which a
//     trainer must never do. Tagged sends on an endpoint in error mode PEER fail cleanly. The
//     puller posts a receive for every missing chunk and asks for all of them in one request;
//     in error mode PEER, UCX moves them as active messages (1 MiB segments, ucx.h) copied
//     out at the receiver. Quiet machine, 100 MB: ~37 ms a pull against ~28 ms for perftest's
//     zero-copy tag_bw (no -e); perftest -e takes ~45 ms with UCX's 64 KiB segments and ~20 ms
//     with our 1 MiB ones, as one message without a CRC: without the CRC our pull takes ~33 ms
//     in 4 MiB chunks, ~25 ms as one chunk. 1 GB: 0.8-1.0 of perftest.
// Each chunk is checked once, as it arrives: piece by piece as UCX copies it in (tcp,
// chunk_landing.h), else in place on a thread of its own (chunk_verifier.h). The whole table is checked against the digest at
// the end; the chunks are checked again only when something besides this puller could have
// written to them since (a receive set aside with a stalled source, see Stuck).
//
// A rollout pulls every version from the same sources, so what a pull sets up is kept for the
// next (measured: setting it up cost 7-12 ms of a 100 MB pull, and zeroing fresh pages a quarter
// of the CPU time of the rest):
//   - one UCX worker for all tagged pulls; a source keeps its endpoint to that worker from one
//     lease to the next (source.h). A new worker is made only when receives are set aside.
//   - the memory received into. The bundle Pull returns holds its buffer; once every copy of
//     that Bundle is gone (the rollout decoded it), the buffer takes a later pull of the same
//     size, its pages mapped and registered already. At most kPooledBuffers are kept, so a
//     caller may hold version v while v+1 arrives (double buffering) without a fresh buffer.
// Thread safety: one Puller per thread.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rl/weights/bundle.h"
#include "rl/weights/chunk_landing.h"
#include "rl/weights/protocol.h"
#include "rl/weights/shared_bytes.h"
#include "rl/weights/ucx.h"
#include "rl/wire/client.h"

namespace rl::weights {

struct PullOptions {
  std::vector<std::string> sources;  // ZeroMQ endpoints of sources
  uint64_t min_version = 0;          // wait for a version at least this new
  // Tagged receives in flight at once; 0: every missing chunk, asked for in one request (a
  // 100 MB pull over tcp took 32 ms so against 43 ms with 4 in flight, refilled as they came).
  uint32_t inflight = 0;
  uint32_t verify_threads = 2;       // threads that check a mapped bundle (1 when on_chunk is set)
  int stall_ms = 5000;               // no chunk for this long: leave the source
  int request_ms = 1000;             // one info/open/close request, before the source counts as gone
  double give_up_s = 60;             // total; Unavailable after it
  int max_bad_chunks = 3;            // corrupt chunks from one source before it is left
  int retry_ms = 100;                // first wait when no source could serve; doubles to 2 s
  const std::atomic<bool>* stop = nullptr;  // may be null; Pull returns Unavailable when it becomes true
  // Test hook, called on each chunk as it arrives, before its CRC is checked.
  std::function<void(size_t chunk, char* data, size_t length)> on_chunk;
};

struct PullReport {
  uint64_t version = 0;
  std::string source;       // the source that sent the last chunk
  int sources_used = 0;     // sources chunks came from
  int failovers = 0;        // sources left before the end (dead, stalled, corrupt, busy)
  int refetched = 0;        // chunks fetched again after a bad CRC
  int restarts = 0;         // partial bundles dropped because no source held their version any more
  double seconds = 0;
};

// One source's answer to "info".
struct SourceOffer {
  std::string endpoint;
  Status status;  // OK when offer is set
  Offer offer;
};

class TaggedReceive;  // pull_tagged.cc

class Puller {
 public:
  // A receive in flight (pull_tagged.cc). UCX writes into it until the receive completes.
  struct Slot {
    size_t chunk = 0;
    bool busy = false;
    void* request = nullptr;  // valid while busy and not done
    UcxCompletion done;
    ChunkLanding landing;     // UCX's buffer for the receive (chunk_landing.h)
  };
  ~Puller();
  // The bundle is received into private memory registered with `context` (see the pool above).
  static Result<std::unique_ptr<Puller>> Create(std::shared_ptr<UcxContext> context, const std::string& id);

  // What each source holds now (sources that do not answer within request_ms are marked so).
  std::vector<SourceOffer> Survey(const std::vector<std::string>& sources, int request_ms);
  // Pulls the newest version any source holds (at least min_version). Fills *report when given.
  Result<Bundle> Pull(const PullOptions& options, PullReport* report = nullptr);

 private:
  struct Target {
    Offer offer;
    std::shared_ptr<UcxMemory> memory;          // private memory for received chunks; made when needed
    std::shared_ptr<const SharedBytes> mapped;  // a same-host source's memfd, checked whole
    std::vector<bool> held;
    size_t missing = 0;
    bool other_writers = false;  // a receive into memory was set aside (Stuck): check again at the end
  };
  friend class TaggedReceive;
  Puller(std::shared_ptr<UcxContext> c, std::string id) : context_(std::move(c)), id_(std::move(id)) {}
  Client& ClientFor(const std::string& endpoint, int request_ms);
  // Reads the missing chunks of *t from one source; OK when none is missing any more.
  Status PullFrom(const std::string& endpoint, const PullOptions& o, Target* t, PullReport* r);
  // The two ways (pull_mapped.cc, pull_tagged.cc); both return with no UCX request in flight.
  Status PullMapped(const std::string& endpoint, const PullOptions& o, const OpenGrant& g, Target* t,
                    PullReport* r);
  Status PullTagged(const std::string& endpoint, const PullOptions& o, const OpenGrant& g, Target* t,
                    PullReport* r);
  // The mapped way with the test hook: each chunk copied out for it, then checked, in order.
  Status CheckWithHook(const std::string& endpoint, const PullOptions& o, const OpenGrant& g, const char* base,
                       Target* t, PullReport* r);
  // Checks the digest and the frame (and every chunk again when other_writers): the last gate
  // before a bundle is used.
  Result<Bundle> Finish(Target* t);

  // An idle pooled buffer of `size` bytes, else a new one (pooled when there is room).
  Result<std::shared_ptr<UcxMemory>> TargetMemory(size_t size);

  static constexpr size_t kPooledBuffers = 2;
  std::shared_ptr<UcxContext> context_;
  std::string id_;
  std::unique_ptr<UcxWorker> worker_;  // for tagged pulls; replaced when its receives are set aside
  // Buffers received into; idle while the pool holds the only reference.
  std::vector<std::shared_ptr<UcxMemory>> pool_;
  std::map<std::string, std::unique_ptr<Client>> clients_;
  // Receives matched to a source that stopped sending cannot be cancelled in UCX 1.13; they keep
  // their worker, slots and target memory (a late write lands in memory no bundle uses, or
  // rewrites the same verified bytes) and are never freed, not even by the destructor: freeing
  // them under UCX would be worse than the leak, which only a stalled, live source causes.
  struct Stuck {
    std::unique_ptr<UcxWorker> worker;
    std::unique_ptr<Slot[]> slots;
    std::shared_ptr<UcxMemory> memory;
  };
  std::vector<Stuck> stuck_;
};

}  // namespace rl::weights
