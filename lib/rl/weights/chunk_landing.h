// ChunkLanding: where a received chunk lands, through a UCX generic datatype. Over tcp, in error
// mode PEER, UCX hands a chunk over in pieces (active messages of up to 1 MiB, ucx.h) and copies
// each out of its own buffer anyway; with this datatype the copy is ours, and the CRC-32C of
// each piece is taken right after it, while it is in the cache, instead of in a second pass
// over the chunk from memory (measured: that pass was ~100 ms of CPU per GB, 16% of a pull's).
//
// Pieces that arrive in order extend one CRC; a chunk whose pieces came out of order (several
// lanes) or with gaps has none, and is checked in place afterwards (ChunkVerifier). The CRC is
// of the bytes as they are in the chunk's memory, read back after the copy.
//
// Use: set dst and length, pass the landing as the buffer of ucp_tag_recv_nbx with count
// length and datatype LandingDatatype(). UCX writes to the landing until the receive completes.
// Thread safety: a landing belongs to the worker's thread.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <optional>

namespace rl::weights {

struct ChunkLanding {
  char* dst = nullptr;
  size_t length = 0;
  size_t next = 0;     // [0, next) arrived in order, and crc is their CRC
  uint32_t crc = 0;
  bool in_order = true;
  bool overrun = false;  // a piece fell outside [0, length): nothing was copied of it
  bool started = false;  // UCX landed the chunk through this (not so when it went contiguous)

  // What UCX calls through the datatype: Start before the first piece, Put for each piece
  // (copies it to dst + offset and extends the CRC; an error for a piece outside the chunk).
  void Start();
  ucs_status_t Put(size_t offset, const void* src, size_t length);
  // The CRC-32C of the whole chunk when every byte arrived in order through Put, else nullopt
  // (the chunk must then be summed where it lies).
  std::optional<uint32_t> Crc() const;
};

// The generic datatype of landings, made once for the process (a ucp datatype needs no context).
ucp_datatype_t LandingDatatype();

}  // namespace rl::weights
