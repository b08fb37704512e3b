// sd_notify(3) without libsystemd: one datagram of "KEY=VALUE" lines to the AF_UNIX socket named
// by $NOTIFY_SOCKET (a path, or "@name" for the abstract namespace). systemd uses READY=1 for
// Type=notify units and WATCHDOG=1 for WatchdogSec=; STATUS= shows in `systemctl status`.
// Thread safety: reentrant.
#pragma once

#include <string>

namespace rl::health {

// True when $NOTIFY_SOCKET is set: this process runs under a notify-aware supervisor.
bool SdNotifyEnabled();
// Sends `state` ("READY=1\nSTATUS=...") to $NOTIFY_SOCKET. Returns false when it is unset or the
// send failed (systemd ignores a unit's notifications it does not want, so failures are quiet).
// Never blocks: a notification that finds the socket's queue full is dropped.
bool SdNotify(const std::string& state);
// The same to a socket named like $NOTIFY_SOCKET; false for an empty name.
bool SdNotifyTo(const std::string& socket, const std::string& state);

}  // namespace rl::health
