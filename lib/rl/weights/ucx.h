// RAII wrappers over UCP (UCX's protocol layer) for weight transfers: context, worker, endpoint,
// mapped memory and unpacked remote key. Each owns one UCX handle and releases it in its
// destructor. Workers and memory hold a shared_ptr to their context, so the context goes last;
// an endpoint REQUIRES its worker, and an rkey its endpoint, to outlive it (declare them in
// that order: they are released in reverse).
//
// Every params struct sets its field_mask. Endpoints use the peer-failure error mode: a dead or
// unreachable peer makes the error callback record a Status, and requests in flight complete
// with an error instead of hanging. Transports come from UCX's own configuration (UCX_TLS, ...);
// a context may override UCX_TLS for itself (rl-profile compares tcp with shared memory).
//
// Thread safety: a context may be shared by threads (it is created with mt_workers_shared);
// a worker, and everything made from it, belongs to one thread at a time.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "rl/core/status.h"

namespace rl::weights {

// UCX_TCP_RX_SEG_SIZE of every context, whatever the environment says. Endpoints in error mode
// PEER get no zero-copy rendezvous over tcp in UCX 1.13: a chunk arrives as active messages of
// up to this size, each received into a UCX buffer and copied out (perftest -e does the same).
// At UCX's default of 64 KiB a 100 MB pull cost 113 ms of CPU, at 1 MiB 63 ms. It must be the
// same in every process: a receiver whose segments are smaller than a sender's aborts
// (tcp_ep.c: "Assertion hdr->length <= rx_seg_size").
extern const char* const kTcpSegment;

// "what: <UCX's text for s>" as a Status: Unavailable for peer and connection failures, Timeout
// for timeouts, Internal otherwise.
Status UcxStatus(ucs_status_t s, const std::string& what);

class UcxContext {
 public:
  // tls: a UCX_TLS value for this context only ("tcp", "sm", ...); empty keeps UCX's setting.
  static Result<std::shared_ptr<UcxContext>> Create(const std::string& tls = "");
  ~UcxContext();
  UcxContext(const UcxContext&) = delete;
  UcxContext& operator=(const UcxContext&) = delete;
  ucp_context_h get() const { return context_; }
  const std::string& tls() const { return tls_; }
  // False when the transports (our override, else UCX_TLS) leave out shared memory.
  bool shm_allowed() const;

 private:
  UcxContext() = default;
  // True when the transports (override_tls, else UCX_TLS, else all) name one of `names`.
  static bool TlsAllows(const std::string& override_tls, std::initializer_list<const char*> names);
  ucp_context_h context_ = nullptr;
  std::string tls_;
};

class UcxWorker {
 public:
  static Result<std::unique_ptr<UcxWorker>> Create(std::shared_ptr<UcxContext> context);
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_worker_h get() const { return worker_; }
  const std::shared_ptr<UcxContext>& context() const { return context_; }
  // The worker's address, to be sent to peers that connect to it.
  const std::string& address() const { return address_; }
  // Runs UCX's progress engine until it has nothing more to do, or for about kProgressMs while
  // events keep coming (a stream of data could otherwise hold the caller for the whole transfer,
  // away from its lease renewals and requests); the number of events handled.
  unsigned Progress();
  static constexpr int kProgressMs = 2;
  // Sleeps until UCX has an event or timeout_ms passes (at once when an event is pending).
  void Wait(int timeout_ms);
  // The worker's event fd, to poll next to other fds: after Arm() returned true, readable means
  // "call Progress". -1 when the transports offer none (then poll with a short timeout).
  int event_fd() const { return efd_; }
  // True when the fd may be slept on; false when events are pending (progress first).
  bool Arm();

 private:
  explicit UcxWorker(std::shared_ptr<UcxContext> c) : context_(std::move(c)) {}
  std::shared_ptr<UcxContext> context_;
  ucp_worker_h worker_ = nullptr;
  std::string address_;
  int efd_ = -1;
};

class UcxEndpoint {
 public:
  // Connects to a worker address. `worker` must outlive the endpoint. With peer_failure the
  // endpoint survives the peer's death (error mode PEER); UCX 1.13's shared-memory transports
  // cannot do that, so an endpoint meant for them is made without it (puller.h says why that is
  // safe there).
  static Result<std::unique_ptr<UcxEndpoint>> Connect(UcxWorker* worker, const std::string& address,
                                                      bool peer_failure = true);
  // Closes the endpoint forcibly (nothing of ours needs a flush: data is confirmed by request
  // completions), cancelling requests in flight, and progresses the worker until it is closed.
  ~UcxEndpoint();
  UcxEndpoint(const UcxEndpoint&) = delete;
  UcxEndpoint& operator=(const UcxEndpoint&) = delete;

  ucp_ep_h get() const { return ep_; }
  // OK until the peer failed; then why (set by UCX's error callback, from Progress).
  Status failure() const;

 private:
  explicit UcxEndpoint(UcxWorker* w) : worker_(w) {}
  static void OnError(void* arg, ucp_ep_h ep, ucs_status_t status);
  UcxWorker* worker_;
  ucp_ep_h ep_ = nullptr;
  ucs_status_t error_ = UCS_OK;
};

// A memory region mapped in a context: allocated by UCX (so shared-memory transports can reach it
// directly) or registered over memory the caller owns.
class UcxMemory {
 public:
  static Result<std::shared_ptr<UcxMemory>> Allocate(std::shared_ptr<UcxContext> context, size_t size);
  // Private anonymous memory (transparent huge pages where allowed) registered with UCX: cheap to
  // fill, but peers reach it by sends only. Measured: filling UCX-allocated shared memory ran at
  // ~1 GB/s here (a tmpfs page allocated per 4 KiB), anonymous memory at memcpy speed.
  static Result<std::shared_ptr<UcxMemory>> AllocatePrivate(std::shared_ptr<UcxContext> context, size_t size);
  // True for memory UCX allocated (shared memory a peer on this host can map).
  bool shared() const { return shared_; }
  // REQUIRES: [data, data + size) stays valid and unmoved while the UcxMemory lives.
  static Result<std::shared_ptr<UcxMemory>> Register(std::shared_ptr<UcxContext> context, void* data,
                                                     size_t size);
  ~UcxMemory();
  UcxMemory(const UcxMemory&) = delete;
  UcxMemory& operator=(const UcxMemory&) = delete;

  char* data() const { return data_; }
  size_t size() const { return size_; }
  ucp_mem_h memh() const { return memh_; }
  const UcxContext* context() const { return context_.get(); }
  // The remote key a peer needs to read this region.
  Result<std::string> PackRkey() const;

 private:
  explicit UcxMemory(std::shared_ptr<UcxContext> c) : context_(std::move(c)) {}
  static Result<std::shared_ptr<UcxMemory>> Map(std::shared_ptr<UcxContext> context, void* data, size_t size,
                                                bool allocate);
  std::shared_ptr<UcxContext> context_;
  ucp_mem_h memh_ = nullptr;
  char* data_ = nullptr;
  size_t size_ = 0;
  bool shared_ = false;
  size_t anonymous_ = 0;  // bytes we mmapped ourselves (AllocatePrivate), unmapped after UCX's unmap
};

// A remote key unpacked for one endpoint. REQUIRES: the endpoint outlives it.
class UcxRkey {
 public:
  static Result<std::unique_ptr<UcxRkey>> Unpack(const UcxEndpoint& ep, const std::string& packed);
  ~UcxRkey();
  UcxRkey(const UcxRkey&) = delete;
  UcxRkey& operator=(const UcxRkey&) = delete;
  ucp_rkey_h get() const { return rkey_; }

 private:
  UcxRkey() = default;
  ucp_rkey_h rkey_ = nullptr;
};

// Maps the pages of [data, data + size) in one system call (MADV_POPULATE_READ or _WRITE)
// instead of a page fault per 4 KiB page on first touch, which made a copy of fresh memory run
// at a twentieth of memcpy's speed. Does nothing where the kernel lacks it.
void Prefault(const void* data, size_t size, bool write);

// Completion of one non-blocking operation, filled by UCX's callback. Lives until completion.
struct UcxCompletion {
  bool done = false;
  ucs_status_t status = UCS_OK;
};
// Handles what a *_nbx call returned: done at once (NULL), an error, or a request whose
// callback (UcxOnComplete, with `c` as user data) fills *c later.
void UcxTrack(ucs_status_ptr_t ret, UcxCompletion* c);
void UcxOnComplete(void* request, ucs_status_t status, void* user_data);
void UcxOnRecvComplete(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data);

}  // namespace rl::weights
