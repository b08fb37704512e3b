// Socket plumbing shared by the wire clients (client.h, pipeline.h): a DEALER socket connected to
// an endpoint with a monitor of its connection events, sending a request's frames (large ones
// without a copy), and reading a reply where it arrived.
// Thread safety: reentrant; a socket is used by one thread.
#pragma once

#include <zmq.hpp>

#include <memory>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/wire/envelope.h"

namespace rl::wire_detail {

using SharedFrame = std::shared_ptr<const std::string>;

// A DEALER socket connected to `endpoint` (linger 0, reconnect 100 ms to 1 s) and, when ZeroMQ can
// make one, a PAIR socket reporting its disconnections and handshakes (*monitor null otherwise).
void OpenDealer(const std::string& endpoint, std::unique_ptr<zmq::socket_t>* socket,
                std::unique_ptr<zmq::socket_t>* monitor);
// Stops the monitor of `socket` (before the socket is closed).
void CloseDealer(std::unique_ptr<zmq::socket_t>* socket, std::unique_ptr<zmq::socket_t>* monitor);

// Reads one monitor event: *lost turns true on a disconnection; *back turns true on a handshake
// after one (and *lost false again).
void ReadMonitorEvent(zmq::socket_t& monitor, bool* lost, bool* back);

// Sends the frames without blocking; false when the socket's send queue is full. Frames of 64 KiB
// or more go without a copy: the socket holds a reference until it is done with them.
// Throws zmq::error_t as cppzmq does.
bool SendFrames(zmq::socket_t& socket, const std::vector<SharedFrame>& frames);

// Receives the rest of a message whose first frame is ready (blocking for its later frames).
std::vector<zmq::message_t> RecvParts(zmq::socket_t& socket);

// A reply's frames, viewed in place; Protocol when they are not a reply.
Result<MessageView> ViewReply(std::vector<zmq::message_t> parts);

Message CopyOf(const MessageView& v);

}  // namespace rl::wire_detail
