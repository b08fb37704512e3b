// The ops of storage units and of their controller (man/rl-protocol.7, "STORAGE UNITS"): the
// bodies of read, free, list and held, encoders for clients, decoders for the servers.
// Thread safety: reentrant functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rl/core/status.h"
#include "rl/wire/envelope.h"

namespace rl::queue {

// Numbers of the protocol, beside the queue's 1-10: never renumber.
constexpr Op kOpRead = static_cast<Op>(11);  // unit: the values of rows, no lease
constexpr Op kOpFree = static_cast<Op>(12);  // unit: rows deleted
constexpr Op kOpList = static_cast<Op>(13);  // unit: rows staged longer ago than an age
constexpr Op kOpHeld = static_cast<Op>(14);  // controller: which unit rows its rows refer to

// The metadata key under which a controller publishes its units' endpoints, comma-separated.
constexpr char kUnitsKey[] = "queue.units";
// ... and the size from which a value goes to a unit (IsUnitValue), in bytes, as a decimal string.
constexpr char kUnitMinBytesKey[] = "queue.unit_min_bytes";
// How a controller's refusal of a reference staged too long ago begins (status timeout): the
// client stages the value again and repeats its put.
constexpr char kStaleStaging[] = "stale staging";
// How a client's error begins when a get reply refers to a unit row that is gone (status not
// found): the controller stopped referring to it after it replied (QueueClient::Get).
constexpr char kFreedValue[] = "freed value";
// The column a unit stamps on every row it stages: its clock (ms since the epoch) then.
constexpr char kStagedColumn[] = "staged_ms";
// At most this many indices in one read, free, list or held.
constexpr size_t kMaxUnitIndices = 1u << 20;

struct ReadRequest {
  std::vector<uint64_t> indices;
  std::vector<std::string> columns;
};
struct ListRequest {
  int64_t age_ms = 0;     // rows staged at least this long ago by the unit's clock
  uint64_t limit = 65536;
  uint64_t from = 0;      // rows of this index and above (a cursor for the next page)
};
struct ListReply {
  std::vector<uint64_t> indices;  // ascending
  int64_t now_ms = 0;             // the unit's clock when it answered
};
struct HeldRequest {
  uint32_t unit = 0;
  std::vector<uint64_t> indices;
};

std::string EncodeRead(const ReadRequest& req);
std::string EncodeFree(const std::vector<uint64_t>& indices);
std::string EncodeList(const ListRequest& req);
std::string EncodeHeld(const HeldRequest& req);
Result<ReadRequest> DecodeRead(std::string_view body);
Result<std::vector<uint64_t>> DecodeFree(std::string_view body);
Result<ListRequest> DecodeList(std::string_view body);
Result<HeldRequest> DecodeHeld(std::string_view body);

// Replies of list and held (read's is a get reply's rows; free's an IndexReply with "freed").
std::string EncodeListReply(const ListReply& r);
Result<ListReply> DecodeListReply(std::string_view body);
std::string EncodeHeldReply(const std::vector<uint64_t>& held);
Result<std::vector<uint64_t>> DecodeHeldReply(std::string_view body);

}  // namespace rl::queue
