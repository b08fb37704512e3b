#include "rl/weights/ucx.h"

#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "rl/core/clock.h"
#include "rl/core/log.h"

namespace rl::weights {
namespace {
// How long a destructor waits for UCX to finish cancelling (a bug, not a peer, could make it hang).
constexpr int kCloseWaitMs = 5000;
}  // namespace

const char* const kTcpSegment = "1M";

Status UcxStatus(ucs_status_t s, const std::string& what) {
  std::string m = what + ": " + ucs_status_string(s);
  switch (s) {
    case UCS_OK: return Status::OK();
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_REJECTED:
    case UCS_ERR_CANCELED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_IO_ERROR: return Status::Unavailable(m);
    case UCS_ERR_TIMED_OUT: return Status::Timeout(m);
    default: return Status::Internal(m);
  }
}

Result<std::shared_ptr<UcxContext>> UcxContext::Create(const std::string& tls) {
  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  if (s != UCS_OK) return UcxStatus(s, "read UCX configuration");
  if (!tls.empty()) {
    s = ucp_config_modify(config, "TLS", tls.c_str());
    if (s != UCS_OK) {
      ucp_config_release(config);
      return Status::InvalidArgument("UCX_TLS=" + tls + ": " + ucs_status_string(s));
    }
  }
  // RX_SEG_SIZE is a field of tcp's configuration only (UCX warns about keys no transport uses).
  s = TlsAllows(tls, {"all", "tcp"}) ? ucp_config_modify(config, "RX_SEG_SIZE", kTcpSegment) : UCS_OK;
  if (s != UCS_OK) {
    ucp_config_release(config);
    return UcxStatus(s, std::string("set UCX_TCP_RX_SEG_SIZE=") + kTcpSegment);
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 1;  // memory is mapped from any thread; workers stay per thread
  params.name = "roleflow-weights";
  std::shared_ptr<UcxContext> c(new UcxContext());
  c->tls_ = tls;
  s = ucp_init(&params, config, &c->context_);
  ucp_config_release(config);
  if (s != UCS_OK) return UcxStatus(s, "initialise UCX" + (tls.empty() ? "" : " with UCX_TLS=" + tls));
  return c;
}

bool UcxContext::shm_allowed() const { return TlsAllows(tls_, {"all", "sm", "shm", "posix", "sysv", "cma"}); }

bool UcxContext::TlsAllows(const std::string& override_tls, std::initializer_list<const char*> names) {
  std::string tls = override_tls;
  if (tls.empty()) {
    const char* env = std::getenv("UCX_TLS");
    tls = env ? env : "all";
  }
  bool exclude = !tls.empty() && tls[0] == '^';  // "^tcp": everything but what is listed
  if (exclude) tls.erase(0, 1);
  for (const char* t : names) {
    size_t at = 0;
    while ((at = tls.find(t, at)) != std::string::npos) {
      size_t end = at + std::strlen(t);
      bool starts = at == 0 || tls[at - 1] == ',';
      bool ends = end == tls.size() || tls[end] == ',';
      if (starts && ends) return !exclude;
      at = end;
    }
  }
  return exclude;
}

UcxContext::~UcxContext() {
  if (context_) ucp_cleanup(context_);
}

Result<std::unique_ptr<UcxWorker>> UcxWorker::Create(std::shared_ptr<UcxContext> context) {
  std::unique_ptr<UcxWorker> w(new UcxWorker(std::move(context)));
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucs_status_t s = ucp_worker_create(w->context_->get(), &params, &w->worker_);
  if (s != UCS_OK) return UcxStatus(s, "create a UCX worker");
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  s = ucp_worker_get_address(w->worker_, &addr, &len);
  if (s != UCS_OK) return UcxStatus(s, "get the UCX worker address");
  w->address_.assign(reinterpret_cast<const char*>(addr), len);
  ucp_worker_release_address(w->worker_, addr);
  if (ucp_worker_get_efd(w->worker_, &w->efd_) != UCS_OK) w->efd_ = -1;
  return w;
}

UcxWorker::~UcxWorker() {
  if (worker_) ucp_worker_destroy(worker_);
}

unsigned UcxWorker::Progress() {
  unsigned total = 0;
  auto until = Clock::now() + std::chrono::milliseconds(kProgressMs);
  while (unsigned n = ucp_worker_progress(worker_)) {
    total += n;
    if (Clock::now() >= until) break;
  }
  return total;
}

bool UcxWorker::Arm() { return efd_ >= 0 && ucp_worker_arm(worker_) == UCS_OK; }

void UcxWorker::Wait(int timeout_ms) {
  if (Progress() > 0) return;
  if (!Arm()) {
    if (efd_ < 0 && timeout_ms > 0) {
      ::poll(nullptr, 0, 1);  // no event fd: poll UCX every millisecond
    }
    return;
  }
  pollfd p{efd_, POLLIN, 0};
  ::poll(&p, 1, timeout_ms);
}

Result<std::unique_ptr<UcxEndpoint>> UcxEndpoint::Connect(UcxWorker* worker, const std::string& address,
                                                          bool peer_failure) {
  std::unique_ptr<UcxEndpoint> e(new UcxEndpoint(worker));
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  params.err_mode = peer_failure ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  params.err_handler.cb = &UcxEndpoint::OnError;
  params.err_handler.arg = e.get();
  ucs_status_t s = ucp_ep_create(worker->get(), &params, &e->ep_);
  if (s != UCS_OK) {
    e->ep_ = nullptr;
    return UcxStatus(s, "connect to the source's UCX worker");
  }
  return e;
}

void UcxEndpoint::OnError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* e = static_cast<UcxEndpoint*>(arg);
  if (e->error_ == UCS_OK) e->error_ = status;
}

Status UcxEndpoint::failure() const {
  return error_ == UCS_OK ? Status::OK() : UcxStatus(error_, "UCX peer failed");
}

UcxEndpoint::~UcxEndpoint() {
  if (!ep_) return;
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  params.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t req = ucp_ep_close_nbx(ep_, &params);
  if (req == nullptr || UCS_PTR_IS_ERR(req)) return;
  int64_t deadline = MonoMillis() + kCloseWaitMs;
  while (ucp_request_check_status(req) == UCS_INPROGRESS) {
    worker_->Progress();
    if (MonoMillis() > deadline) {
      spdlog::warn("a UCX endpoint took more than {} ms to close", kCloseWaitMs);
      break;
    }
  }
  ucp_request_free(req);
}

Result<std::shared_ptr<UcxMemory>> UcxMemory::Allocate(std::shared_ptr<UcxContext> context, size_t size) {
  return Map(std::move(context), nullptr, size, true);
}

Result<std::shared_ptr<UcxMemory>> UcxMemory::Register(std::shared_ptr<UcxContext> context, void* data,
                                                       size_t size) {
  return Map(std::move(context), data, size, false);
}

Result<std::shared_ptr<UcxMemory>> UcxMemory::Map(std::shared_ptr<UcxContext> context, void* data, size_t size,
                                                  bool allocate) {
  std::shared_ptr<UcxMemory> m(new UcxMemory(std::move(context)));
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_FLAGS | UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
  params.address = data;
  params.length = size == 0 ? 1 : size;  // UCX refuses empty regions
  params.flags = allocate ? UCP_MEM_MAP_ALLOCATE : 0;
  params.memory_type = UCS_MEMORY_TYPE_HOST;
  ucs_status_t s = ucp_mem_map(m->context_->get(), &params, &m->memh_);
  if (s != UCS_OK) {
    m->memh_ = nullptr;
    return UcxStatus(s, std::string(allocate ? "allocate " : "register ") + std::to_string(size) +
                            " bytes of UCX memory");
  }
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
  s = ucp_mem_query(m->memh_, &attr);
  if (s != UCS_OK) return UcxStatus(s, "query UCX memory");
  m->data_ = static_cast<char*>(attr.address);
  m->size_ = size;
  m->shared_ = allocate;
  if (allocate) Prefault(m->data_, size, true);
  return m;
}

Result<std::shared_ptr<UcxMemory>> UcxMemory::AllocatePrivate(std::shared_ptr<UcxContext> context, size_t size) {
  size_t len = size == 0 ? 1 : size;
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return Status::IOError("mmap of " + std::to_string(size) + " bytes failed");
  (void)::madvise(p, len, MADV_HUGEPAGE);
  auto m = Register(std::move(context), p, size);
  if (!m.ok()) {
    ::munmap(p, len);
    return m.status();
  }
  (*m)->anonymous_ = len;
  return m;
}

UcxMemory::~UcxMemory() {
  if (memh_) ucp_mem_unmap(context_->get(), memh_);
  if (anonymous_) ::munmap(data_, anonymous_);
}

Result<std::string> UcxMemory::PackRkey() const {
  void* buf = nullptr;
  size_t len = 0;
  ucs_status_t s = ucp_rkey_pack(context_->get(), memh_, &buf, &len);
  if (s != UCS_OK) return UcxStatus(s, "pack a UCX remote key");
  std::string out(static_cast<const char*>(buf), len);
  ucp_rkey_buffer_release(buf);
  return out;
}

Result<std::unique_ptr<UcxRkey>> UcxRkey::Unpack(const UcxEndpoint& ep, const std::string& packed) {
  std::unique_ptr<UcxRkey> r(new UcxRkey());
  ucs_status_t s = ucp_ep_rkey_unpack(ep.get(), packed.data(), &r->rkey_);
  if (s != UCS_OK) {
    r->rkey_ = nullptr;
    return UcxStatus(s, "unpack the source's remote key");
  }
  return r;
}

UcxRkey::~UcxRkey() {
  if (rkey_) ucp_rkey_destroy(rkey_);
}

void UcxOnComplete(void* request, ucs_status_t status, void* user_data) {
  auto* c = static_cast<UcxCompletion*>(user_data);
  c->status = status;
  c->done = true;
  ucp_request_free(request);
}

void Prefault(const void* data, size_t size, bool write) {
#ifdef MADV_POPULATE_WRITE
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(page - 1);
  uintptr_t end = reinterpret_cast<uintptr_t>(data) + size;
  if (size == 0) return;
  (void)::madvise(reinterpret_cast<void*>(begin), end - begin, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
#else
  (void)data, (void)size, (void)write;
#endif
}

void UcxOnRecvComplete(void* request, ucs_status_t status, const ucp_tag_recv_info_t*, void* user_data) {
  UcxOnComplete(request, status, user_data);
}

void UcxTrack(ucs_status_ptr_t ret, UcxCompletion* c) {
  if (ret == nullptr) {
    c->done = true;
    c->status = UCS_OK;
  } else if (UCS_PTR_IS_ERR(ret)) {
    c->done = true;
    c->status = UCS_PTR_STATUS(ret);
  }
  // Otherwise UcxOnComplete fills *c when the request completes.
}

}  // namespace rl::weights
