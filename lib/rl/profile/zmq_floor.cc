#include "rl/profile/zmq_floor.h"

#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace rl::profile {
namespace {

constexpr int kPollMs = 50;
constexpr int kReplyTimeoutMs = 10000;

using SteadyClock = std::chrono::steady_clock;

// Answers every request with reply_bytes until *stop.
Status Echo(zmq::socket_t& router, size_t reply_bytes, const std::atomic<bool>& stop) {
  const std::string reply(reply_bytes, 'r');
  try {
    while (!stop.load()) {
      zmq::pollitem_t item{static_cast<void*>(router), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(kPollMs));
      zmq::message_t id, part;
      if (!(item.revents & ZMQ_POLLIN) || !router.recv(id, zmq::recv_flags::dontwait)) continue;
      for (bool more = id.more(); more; more = part.more()) {
        if (!router.recv(part, zmq::recv_flags::none)) break;
      }
      router.send(id, zmq::send_flags::sndmore);
      router.send(zmq::buffer(reply), zmq::send_flags::none);
    }
  } catch (const zmq::error_t& e) {
    return Status::Internal(std::string("zmq floor server: ") + e.what());
  }
  return Status::OK();
}

Status Client(zmq::context_t& ctx, const std::string& endpoint, const FloorShape& shape, SteadyClock::time_point deadline,
              OpFigure* fig) try {
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(endpoint);
  const std::string request(shape.request_bytes, 'q');
  for (uint64_t i = 0; i < shape.round_trips && SteadyClock::now() < deadline; ++i) {
    if (shape.stop && shape.stop->load()) return Status::Timeout("interrupted");
    auto t0 = SteadyClock::now();
    dealer.send(zmq::buffer(request), zmq::send_flags::none);
    zmq::pollitem_t item{static_cast<void*>(dealer), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(kReplyTimeoutMs));
    zmq::message_t reply;
    if (!(item.revents & ZMQ_POLLIN) || !dealer.recv(reply, zmq::recv_flags::none)) {
      return Status::Timeout("zmq floor: no reply within " + std::to_string(kReplyTimeoutMs) + " ms");
    }
    fig->latency_us.push_back(std::chrono::duration<double, std::micro>(SteadyClock::now() - t0).count());
    fig->rows += shape.rows_per_trip;
  }
  return Status::OK();
} catch (const zmq::error_t& e) {
  return Status::Internal(std::string("zmq floor client: ") + e.what());
}

}  // namespace

Result<OpFigure> MeasureZmqFloor(const FloorShape& shape) {
  try {
    zmq::context_t server_ctx(1), client_ctx(1);
    zmq::socket_t router(server_ctx, zmq::socket_type::router);
    router.set(zmq::sockopt::linger, 0);
    router.bind("tcp://127.0.0.1:0");
    std::string endpoint = router.get(zmq::sockopt::last_endpoint);
    std::atomic<bool> stop{false};
    Status echo_status;
    std::thread echo([&] { echo_status = Echo(router, shape.reply_bytes, stop); });
    auto deadline = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                             std::chrono::duration<double>(shape.limit_s));
    std::vector<OpFigure> figs(shape.clients);
    std::vector<Status> status(shape.clients);
    std::vector<std::thread> clients;
    auto start = SteadyClock::now();
    for (int i = 0; i < shape.clients; ++i) {
      clients.emplace_back([&, i] { status[i] = Client(client_ctx, endpoint, shape, deadline, &figs[i]); });
    }
    for (auto& t : clients) t.join();
    auto end = SteadyClock::now();
    stop = true;
    echo.join();
    RL_RETURN_IF_ERROR(echo_status);
    OpFigure out;
    for (int i = 0; i < shape.clients; ++i) {
      RL_RETURN_IF_ERROR(status[i]);
      out.Merge(figs[i]);
    }
    out.seconds = std::chrono::duration<double>(end - start).count();
    return out;
  } catch (const zmq::error_t& e) {
    return Status::Internal(std::string("zmq floor: ") + e.what());
  }
}

}  // namespace rl::profile
