#include "rl/weights/source.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/weights/shared_bytes.h"
#include "rl/wire/client.h"

namespace rl::weights {
namespace {
constexpr int kIdlePollMs = 200;     // how often an idle source looks at its stop flag
constexpr int kActivePollMs = 20;    // with leases held and no event fd to sleep on: short naps
constexpr size_t kMaxRequestsPerTurn = 64;
}  // namespace

Result<std::unique_ptr<Source>> Source::Start(std::shared_ptr<UcxContext> context, SourceOptions options) {
  if (options.max_pulls == 0) return Status::InvalidArgument("--max-pulls must be at least 1");
  std::unique_ptr<Source> s(new Source(std::move(context), std::move(options)));
  RL_ASSIGN_OR_RETURN(s->worker_, UcxWorker::Create(s->context_));
  try {
    s->socket_ = std::make_unique<zmq::socket_t>(ZmqContext(), zmq::socket_type::router);
    s->socket_->set(zmq::sockopt::linger, 0);
    s->socket_->set(zmq::sockopt::maxmsgsize, int64_t{1} << 20);  // requests are small
    s->socket_->bind(s->options_.bind);
    s->endpoint_ = s->socket_->get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("bind " + s->options_.bind + ": " + e.what());
  }
  // Lease numbers start at a random point so a restarted source never honours an old lease.
  std::random_device rd;
  s->next_lease_ = ((uint64_t{rd()} << 32) ^ rd()) & 0xffffffffffffULL;
  s->host_ = HostName();
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  return s;
}

Source::~Source() { Stop(); }

void Source::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  leases_.clear();
  peers_.clear();
  active_ = 0;
}

Status Source::Publish(const Bundle& bundle) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (current_ && bundle.version <= current_->bundle.version) {
      return Status::Conflict("version " + std::to_string(bundle.version) + " is not newer than the served " +
                              std::to_string(current_->bundle.version));
    }
  }
  auto served = std::make_shared<Served>();
  served->bundle = bundle;
  // Bytes in a sealed memfd (pulled by mapping another source's) are served as they are;
  // anything else is copied into one once, so pullers on this host can map it.
  served->shared = std::dynamic_pointer_cast<const SharedBytes>(bundle.bytes);
  if (!served->shared) {
    RL_ASSIGN_OR_RETURN(served->shared, SharedBytes::Seal(bundle.version, bundle.data(), bundle.size()));
    served->bundle.bytes = served->shared;
  }
  // Registered for the tagged sends to pullers elsewhere (read-only: UCX only reads it).
  RL_ASSIGN_OR_RETURN(served->memory, UcxMemory::Register(context_, const_cast<char*>(served->shared->data()),
                                                          bundle.size()));
  RL_ASSIGN_OR_RETURN(served->rkey, served->memory->PackRkey());
  std::lock_guard<std::mutex> lock(mu_);
  if (current_ && bundle.version <= current_->bundle.version) return Status::Conflict("a newer version came first");
  current_ = std::move(served);
  spdlog::debug("serving version {} ({} bytes, digest {})", bundle.version, bundle.size(), DigestHex(bundle.digest()));
  if (options_.events) {
    options_.events->Emit("weights-serve", {{"version", bundle.version}, {"bytes", bundle.size()},
                                            {"digest", DigestHex(bundle.digest())}});
  }
  return Status::OK();
}

std::optional<Bundle> Source::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!current_) return std::nullopt;
  return current_->bundle;
}

void Source::Loop() {
  while (!stop_) {
    if (paused_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    worker_->Progress();
    // Sleep on the socket and the worker's fd; only when the fd cannot be armed (events are
    // pending, or the transports have no fd) come back soon to progress again.
    bool armed = worker_->Arm();
    int timeout = kIdlePollMs;
    if (!armed && worker_->event_fd() >= 0) timeout = 0;
    if (!armed && worker_->event_fd() < 0 && !leases_.empty()) timeout = kActivePollMs;
    zmq::pollitem_t items[2] = {{static_cast<void*>(*socket_), 0, ZMQ_POLLIN, 0},
                                {nullptr, worker_->event_fd(), ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, armed ? 2 : 1, std::chrono::milliseconds(timeout));
      for (size_t n = 0; n < kMaxRequestsPerTurn; ++n) {
        std::vector<std::string> frames;
        bool more = true;
        while (more) {
          zmq::message_t part;
          if (!socket_->recv(part, zmq::recv_flags::dontwait)) break;
          frames.emplace_back(static_cast<const char*>(part.data()), part.size());
          more = part.more();
        }
        if (frames.empty()) break;
        HandleFrames(std::move(frames));
      }
    } catch (const zmq::error_t& e) {
      spdlog::warn("weight source socket: {}", e.what());
    }
    ExpireLeases();
  }
}

void Source::HandleFrames(std::vector<std::string> frames) {
  std::string routing = std::move(frames.front());
  frames.erase(frames.begin());
  Message reply;
  Header h;
  Status status;
  auto req = DecodeRequest(std::move(frames));
  if (!req.ok()) {
    status = req.status();
  } else {
    h = req->header;
    reply = Dispatch(*req, &status);
  }
  reply.header.op = h.op;
  reply.header.rid = h.rid;
  reply.header.seq = h.seq;
  reply.header.status = static_cast<uint8_t>(status.code());
  reply.header.msg = status.ok() ? "" : status.message();
  if (!status.ok()) {
    reply.body = EmptyBody();
    reply.blobs.clear();
  }
  std::vector<std::string> out = EncodeReply(reply);
  socket_->send(zmq::buffer(routing), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
  for (size_t i = 0; i < out.size(); ++i) {
    auto flags = i + 1 < out.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
    socket_->send(zmq::buffer(out[i]), flags | zmq::send_flags::dontwait);
  }
}

Message Source::Dispatch(const Message& req, Status* status) {
  Result<Message> r = Status::Protocol("unknown op " + OpName(req.header.op));
  if (req.header.op == static_cast<uint8_t>(kOpInfo)) {
    std::lock_guard<std::mutex> lock(mu_);
    if (current_) {
      r = EncodeInfoReply(OfferOf(*current_));
    } else {
      r = Status::NotFound("no weights yet");
    }
  } else if (req.header.op == static_cast<uint8_t>(kOpOpen)) {
    r = Open(req);
  } else if (req.header.op == static_cast<uint8_t>(kOpSend)) {
    r = Send(req);
  } else if (req.header.op == static_cast<uint8_t>(kOpClose)) {
    r = Close(req);
  } else if (req.header.op == static_cast<uint8_t>(Op::kPing)) {
    r = Message{Header{}, EmptyBody(), {}};
  }
  *status = r.status();
  return r.ok() ? std::move(r).value() : Message{};
}

Offer Source::OfferOf(const Served& s) const {
  Offer o;
  o.version = s.bundle.version;
  o.table = s.bundle.table;
  o.digest = s.bundle.digest();
  o.active = static_cast<uint32_t>(leases_.size());
  o.max_pulls = options_.max_pulls;
  return o;
}

Result<Message> Source::Open(const Message& req) {
  RL_ASSIGN_OR_RETURN(uint64_t version, DecodeOpenRequest(req));
  std::shared_ptr<Served> served;
  {
    std::lock_guard<std::mutex> lock(mu_);
    served = current_;
  }
  if (!served) return Status::NotFound("no weights yet");
  if (served->bundle.version != version) {
    return Status::NotFound("version " + std::to_string(version) + " not held (serving " +
                            std::to_string(served->bundle.version) + ")");
  }
  ExpireLeases();
  if (leases_.size() >= options_.max_pulls) {
    return Status::Unavailable("busy: " + std::to_string(leases_.size()) + " pulls in progress");
  }
  OpenGrant g;
  g.offer = OfferOf(*served);
  g.worker_address = worker_->address();
  g.rkey = served->rkey;
  g.remote_addr = reinterpret_cast<uint64_t>(served->memory->data());
  g.lease = next_lease_++;
  g.lease_ms = options_.lease_ms;
  g.host = host_;
  g.shm = context_->shm_allowed();
  g.pid = static_cast<uint32_t>(::getpid());
  g.fd = static_cast<uint32_t>(served->shared->fd());
  Lease& lease = leases_[g.lease];
  lease.served = served;
  lease.deadline_ms = MonoMillis() + options_.lease_ms;
  active_ = static_cast<uint32_t>(leases_.size());
  served_++;
  return EncodeOpenReply(g);
}

Result<Message> Source::Close(const Message& req) {
  RL_ASSIGN_OR_RETURN(CloseRequest c, DecodeCloseRequest(req));
  auto it = leases_.find(c.lease);
  if (it == leases_.end()) return Status::NotFound("lease " + std::to_string(c.lease) + " is not held");
  if (c.renew) {
    it->second.deadline_ms = MonoMillis() + options_.lease_ms;
  } else {
    EndLease(it);
  }
  active_ = static_cast<uint32_t>(leases_.size());
  return Message{Header{}, EmptyBody(), {}};
}

void Source::OnSendComplete(void* request, ucs_status_t, void* user_data) {
  auto* op = static_cast<SendOp*>(user_data);
  ucp_request_free(request);
  if (op->orphaned) {
    delete op;
  } else {
    op->done = true;
  }
}

bool Source::Lease::sending() const {
  return std::any_of(sends.begin(), sends.end(), [](const SendOp* op) { return !op->done; });
}

Source::Lease::~Lease() {
  ep.reset();
  for (SendOp* op : sends) {
    if (op->done) {
      delete op;
    } else {
      op->orphaned = true;
    }
  }
}

Result<Message> Source::Send(const Message& req) {
  RL_ASSIGN_OR_RETURN(SendRequest r, DecodeSendRequest(req));
  auto it = leases_.find(r.lease);
  if (it == leases_.end()) return Status::NotFound("lease " + std::to_string(r.lease) + " is not held");
  Lease& lease = it->second;
  if (!lease.ep) {
    RL_ASSIGN_OR_RETURN(lease.ep, EndpointTo(r.address));
    lease.peer = r.address;
  }
  RL_RETURN_IF_ERROR(lease.ep->failure());
  const ChunkTable& table = lease.served->bundle.table;
  // Completed sends are forgotten; the rest stay until they complete or the lease ends.
  lease.sends.erase(std::remove_if(lease.sends.begin(), lease.sends.end(),
                                   [](SendOp* op) {
                                     bool done = op->done;
                                     if (done) delete op;
                                     return done;
                                   }),
                    lease.sends.end());
  for (uint64_t chunk : r.chunks) {
    if (chunk >= table.chunks()) return Status::InvalidArgument("chunk " + std::to_string(chunk) + " out of range");
    auto* op = new SendOp();
    op->pin = lease.served;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMH;
    p.cb.send = &Source::OnSendComplete;
    p.user_data = op;
    p.memh = lease.served->memory->memh();
    ucs_status_ptr_t ret = ucp_tag_send_nbx(lease.ep->get(), lease.served->memory->data() + table.ChunkOffset(chunk),
                                            table.ChunkLength(chunk), ChunkTag(r.lease, chunk), &p);
    if (ret == nullptr || UCS_PTR_IS_ERR(ret)) op->done = true;  // no callback will come
    lease.sends.push_back(op);
  }
  lease.deadline_ms = std::max(lease.deadline_ms, MonoMillis() + options_.lease_ms);
  return Message{Header{}, EmptyBody(), {}};
}

void Source::ExpireLeases() {
  int64_t now = MonoMillis();
  for (auto it = leases_.begin(); it != leases_.end();) {
    bool failed = it->second.ep && !it->second.ep->failure().ok();
    if (failed) spdlog::debug("lease {}: {}", it->first, it->second.ep->failure().message());
    if (it->second.deadline_ms <= now || failed) {
      spdlog::debug("lease {} on version {} expired", it->first, it->second.served->bundle.version);
      it = EndLease(it);
    } else {
      ++it;
    }
  }
  for (auto it = peers_.begin(); it != peers_.end();) {
    it = it->second.ep->failure().ok() ? std::next(it) : peers_.erase(it);
  }
  active_ = static_cast<uint32_t>(leases_.size());
}

std::map<uint64_t, Source::Lease>::iterator Source::EndLease(std::map<uint64_t, Lease>::iterator it) {
  const Lease& lease = it->second;
  auto peer = peers_.find(lease.peer);
  if (lease.ep && (lease.sending() || !lease.ep->failure().ok()) && peer != peers_.end() && peer->second.ep == lease.ep) {
    peers_.erase(peer);  // the last reference may be the lease's: its destructor closes the endpoint
  }
  return leases_.erase(it);
}

Result<std::shared_ptr<UcxEndpoint>> Source::EndpointTo(const std::string& address) {
  int64_t now = MonoMillis();
  auto it = peers_.find(address);
  if (it != peers_.end() && it->second.ep->failure().ok()) {
    it->second.used_ms = now;
    return it->second.ep;
  }
  if (it != peers_.end()) peers_.erase(it);
  if (peers_.size() >= kMaxPeers) {
    peers_.erase(std::min_element(peers_.begin(), peers_.end(), [](const auto& a, const auto& b) {
      return a.second.used_ms < b.second.used_ms;
    }));
  }
  // Error mode PEER: a puller that dies makes the sends to it fail, never the source.
  RL_ASSIGN_OR_RETURN(std::unique_ptr<UcxEndpoint> ep, UcxEndpoint::Connect(worker_.get(), address, true));
  std::shared_ptr<UcxEndpoint> shared = std::move(ep);
  peers_[address] = Peer{shared, now};
  return shared;
}

}  // namespace rl::weights
