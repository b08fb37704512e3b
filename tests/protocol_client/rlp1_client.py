#!/usr/bin/python3
"""An RLP1 client for rl-queue, written from rl-protocol(7) alone.

It exists to show that the manual is enough to write a client: it was written
without looking at the server's or the reference client's sources.
(Pipeline, added later, follows the section Several requests in flight; its
author had read the sources, so it shows that section is followed, less that
it suffices alone.)

    rlp1_client.py ENDPOINT selftest        run a full scenario against a server
    rlp1_client.py ENDPOINT pipeline        puts and acks through a 4-lane Pipeline
    rlp1_client.py ENDPOINT ping|stat       print one reply body

As a library:

    c = Client("tcp://127.0.0.1:5555")
    c.declare("score", ["prompt", "ids"])
    c.put([{"prompt": "hi", "ids": Tensor.from_list("i64", [1, 2, 3])}])
    reply = c.get("score", count=1)
    c.ack("score", [row["index"] for row in reply["rows"]], lease=reply["lease"])

Needs only the standard library, pyzmq and msgpack (>= 1.0).
"""

import os
import random
import socket
import struct
import sys
import threading
import time

import msgpack
import zmq

PROTOCOL_ID = b"RLP1"

# Operation codes (rl-protocol(7), HEADER).
OPS = {"ping": 1, "put": 2, "get": 3, "ack": 4, "nack": 5, "stat": 6,
       "meta_get": 7, "meta_set": 8, "declare": 9, "retire": 10}

# Status codes (rl-protocol(7), STATUS CODES).
STATUS = {0: "OK", 1: "InvalidArgument", 2: "DataError", 3: "NotFound",
          4: "Conflict", 5: "Unavailable", 6: "Timeout", 7: "Protocol",
          8: "TooLarge", 9: "Corruption", 10: "IOError", 11: "Config",
          12: "Internal"}
OK, INVALID_ARGUMENT, DATA_ERROR, NOT_FOUND, CONFLICT = 0, 1, 2, 3, 4
UNAVAILABLE, TIMEOUT, PROTOCOL, TOO_LARGE = 5, 6, 7, 8

# Reliability parameters of the reference client (rl-protocol(7), LIMITS).
ATTEMPT_TIMEOUT_S = 3.0
BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 32.0
GIVE_UP_S = 60.0


class RLPError(Exception):
    """A reply with a non-zero status, or a status made up by this client."""

    def __init__(self, status, msg, op=0, rid=0):
        self.status, self.msg, self.op, self.rid = status, msg, op, rid
        super().__init__("%s (%d): %s" % (STATUS.get(status, "?"), status, msg))


# ---------------------------------------------------------------- tensors --

# dtype code -> (name, element size, struct format or None)
DTYPES = {0: ("bool", 1, "?"), 1: ("u8", 1, "B"), 2: ("i8", 1, "b"),
          3: ("i16", 2, "h"), 4: ("i32", 4, "i"), 5: ("i64", 8, "q"),
          6: ("f16", 2, "e"), 7: ("bf16", 2, None), 8: ("f32", 4, "f"),
          9: ("f64", 8, "d")}
DTYPE_CODE = {name: code for code, (name, _, _) in DTYPES.items()}
EXT_INLINE, EXT_FRAME = 1, 2
MAX_NDIM = 8
MAX_ELEMENTS = 1 << 40
FRAME_THRESHOLD = 4096  # the reference client's choice, not a protocol rule


class Tensor:
    """dtype name, shape tuple, and the elements as little-endian C-order bytes."""

    def __init__(self, dtype, shape, data):
        if dtype not in DTYPE_CODE:
            raise ValueError("unknown dtype %r" % (dtype,))
        self.dtype, self.shape, self.data = dtype, tuple(shape), bytes(data)
        if len(self.shape) > MAX_NDIM:
            raise ValueError("more than %d dimensions" % MAX_NDIM)
        if any(d < 0 or d > MAX_ELEMENTS for d in self.shape) or self.size() > MAX_ELEMENTS:
            raise ValueError("dimension out of range")
        if len(self.data) != self.size() * DTYPES[DTYPE_CODE[dtype]][1]:
            raise ValueError("data is %d bytes, shape %r of %s needs %d" % (
                len(self.data), self.shape, dtype,
                self.size() * DTYPES[DTYPE_CODE[dtype]][1]))

    def size(self):
        n = 1  # ndim 0: one element
        for d in self.shape:
            n *= d
        return n

    @classmethod
    def from_list(cls, dtype, values, shape=None):
        fmt = DTYPES[DTYPE_CODE[dtype]][2]
        if fmt is None:
            raise ValueError("no struct format for %s" % dtype)
        values = list(values)
        return cls(dtype, (len(values),) if shape is None else shape,
                   struct.pack("<%d%s" % (len(values), fmt), *values))

    def tolist(self):
        """The elements as a flat list (not for bf16)."""
        fmt = DTYPES[DTYPE_CODE[self.dtype]][2]
        if fmt is None:
            raise ValueError("no struct format for %s" % self.dtype)
        return list(struct.unpack("<%d%s" % (self.size(), fmt), self.data))

    def header(self):
        return struct.pack("<BB%dq" % len(self.shape), DTYPE_CODE[self.dtype],
                           len(self.shape), *self.shape)

    def __eq__(self, other):
        return (isinstance(other, Tensor) and self.dtype == other.dtype
                and self.shape == other.shape and self.data == other.data)

    def __repr__(self):
        return "Tensor(%s, %r, %d bytes)" % (self.dtype, self.shape, len(self.data))


def decode_tensor(code, payload, blobs):
    """An ext value of type 1 or 2 -> Tensor; blobs are frames 3.. of the message."""
    if code not in (EXT_INLINE, EXT_FRAME):
        raise RLPError(PROTOCOL, "unknown ext type %d" % code)
    if len(payload) < 2:
        raise RLPError(PROTOCOL, "tensor ext payload too short")
    dtype, ndim = payload[0], payload[1]
    if dtype not in DTYPES or ndim > MAX_NDIM:
        raise RLPError(PROTOCOL, "bad tensor dtype %d or ndim %d" % (dtype, ndim))
    head = 2 + 8 * ndim
    if len(payload) < head:
        raise RLPError(PROTOCOL, "tensor ext payload too short for its dims")
    shape = struct.unpack_from("<%dq" % ndim, payload, 2)
    if code == EXT_INLINE:
        data = payload[head:]
    else:
        if len(payload) != head + 4:
            raise RLPError(PROTOCOL, "ext type 2 payload is not 2 + 8*ndim + 4 bytes")
        (frame,) = struct.unpack_from("<I", payload, head)
        if frame >= len(blobs):
            raise RLPError(PROTOCOL, "tensor names blob %d, message has %d" % (frame, len(blobs)))
        data = blobs[frame]
    try:
        return Tensor(DTYPES[dtype][0], shape, data)
    except ValueError as e:
        raise RLPError(PROTOCOL, "bad tensor: %s" % e)


def pack(obj, blobs=None, frame_threshold=FRAME_THRESHOLD):
    """msgpack bytes of obj. Tensors go inline, or, when blobs is a list and
    their data has frame_threshold bytes or more, into a new blob (ext type 2)."""

    def default(value):
        if isinstance(value, Tensor):
            if blobs is not None and len(value.data) >= frame_threshold:
                blobs.append(value.data)
                return msgpack.ExtType(EXT_FRAME, value.header() + struct.pack("<I", len(blobs) - 1))
            return msgpack.ExtType(EXT_INLINE, value.header() + value.data)
        raise TypeError("cannot send %r" % (value,))

    # use_bin_type: bytes -> bin, str -> str; floats stay float 64.
    return msgpack.packb(obj, default=default, use_bin_type=True)


def unpack(data, blobs=()):
    """One msgpack document using every byte of data (msgpack-map rule)."""
    return msgpack.unpackb(
        data, raw=False, strict_map_key=False,
        # the server does not check UTF-8: keep invalid bytes rather than fail
        unicode_errors="surrogateescape",
        ext_hook=lambda code, payload: decode_tensor(code, payload, blobs))


# ----------------------------------------------------------------- client --

class Client:
    """One sender id; one outstanding request at a time (so at most one
    mutating request outstanding per sender id, as RELIABILITY asks)."""

    def __init__(self, endpoint, prefix="rlp1-py", give_up_s=GIVE_UP_S,
                 attempt_timeout_s=ATTEMPT_TIMEOUT_S, frame_threshold=FRAME_THRESHOLD):
        self.endpoint = endpoint
        self.sender = "%s@%s:%d:%016x" % (prefix, socket.gethostname(), os.getpid(),
                                          random.getrandbits(64))
        self.rid = random.getrandbits(47)   # rids of one sender never repeat
        self.seq = 0                        # +1 per message sent, retries included
        self.give_up_s = give_up_s
        self.attempt_timeout_s = attempt_timeout_s
        self.frame_threshold = frame_threshold
        self.last_reply_header = None   # header of the last reply received
        self.last_reply_blobs = 0       # how many blob frames it had
        self.ctx = zmq.Context.instance()
        self.sock = None
        self._connect()

    def _connect(self):
        if self.sock is not None:
            self.sock.close(linger=0)
        self.sock = self.ctx.socket(zmq.DEALER)  # not REQ: no empty delimiter frame
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.RECONNECT_IVL, 100)
        self.sock.setsockopt(zmq.RECONNECT_IVL_MAX, 2000)
        self.sock.connect(self.endpoint)

    def close(self):
        if self.sock is not None:
            self.sock.close(linger=0)
            self.sock = None

    def new_rid(self):
        self.rid += 1
        return self.rid

    def call(self, op, body=None, wait_ms=0, rid=None, inline_only=False):
        """Send a request until a reply with its rid comes; return the reply body.

        op is a name or a code. rid=None takes a new request id; pass an
        earlier rid only to retry that request. A non-zero status raises
        RLPError and is never retried."""
        opcode = OPS[op] if isinstance(op, str) else op
        if rid is None:
            rid = self.new_rid()
        self.last_reply_header, self.last_reply_blobs = None, 0
        blobs = None if inline_only else []
        body_bytes = pack({} if body is None else body, blobs, self.frame_threshold)
        frames_out = [PROTOCOL_ID, None, body_bytes] + (blobs or [])
        start, backoff = time.monotonic(), BACKOFF_FIRST_S
        while True:
            self.seq += 1
            header = {"op": opcode, "rid": rid, "seq": self.seq, "from": self.sender}
            frames_out[1] = pack(header)
            attempt_s = self.attempt_timeout_s
            if self.give_up_s > 0:
                attempt_s = min(attempt_s, max(0.05, self.give_up_s - (time.monotonic() - start)))
            deadline = time.monotonic() + attempt_s + wait_ms / 1000.0
            try:
                self.sock.send_multipart(frames_out, copy=False)
                reply = self._await(rid, deadline)
            except zmq.ZMQError:
                reply = None
            if reply is not None:
                return reply
            elapsed = time.monotonic() - start
            if self.give_up_s > 0 and elapsed >= self.give_up_s:
                raise RLPError(UNAVAILABLE, "no reply from %s after %.1f s" % (self.endpoint, elapsed),
                               opcode, rid)
            pause = backoff if self.give_up_s <= 0 else min(backoff, self.give_up_s - elapsed)
            time.sleep(max(0.0, pause))
            backoff = min(backoff * 2, BACKOFF_MAX_S)
            self._connect()  # new DEALER socket, then the same request: same rid, next seq

    def _await(self, rid, deadline):
        """The body of the reply with this rid, or None on timeout."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if not self.sock.poll(max(1, int(left * 1000))):
                continue
            frames = self.sock.recv_multipart()
            try:
                if len(frames) < 3 or frames[0] != PROTOCOL_ID:
                    raise ValueError("not an RLP1 message")
                header = unpack(frames[1])
                if not isinstance(header, dict):
                    raise ValueError("header is not a map")
                if header.get("rid") != rid:
                    continue  # a late reply to an earlier attempt (or rid 0)
                status, msg = header["status"], header.get("msg", "")
                if status != OK:
                    self.last_reply_header = header
                    raise RLPError(status, msg, header.get("op", 0), rid)
                body = unpack(frames[2], frames[3:])
                if not isinstance(body, dict):
                    raise ValueError("body is not a map")
            except RLPError:
                raise
            except (ValueError, KeyError, TypeError, msgpack.UnpackException) as e:
                raise RLPError(PROTOCOL, "undecodable reply: %s" % e, 0, rid)
            self.last_reply_header, self.last_reply_blobs = header, len(frames) - 3
            return body

    # ------------------------------------------------------------ the ops --

    def ping(self):
        return self.call("ping")

    def put(self, rows, ack_task=None, ack_lease=None, rid=None, inline_only=False):
        body = {"rows": rows}
        if ack_task is not None:
            body["ack_task"] = ack_task
        if ack_lease is not None:
            body["ack_lease"] = ack_lease
        return self.call("put", body, rid=rid, inline_only=inline_only)

    def get(self, task, count=1, columns=None, wait_ms=0, rid=None, **fields):
        """fields: min, lease_ms, groups, min_version, on_stale, drop_uniform,
        balance, parts (rl-protocol(7), get)."""
        body = {"task": task, "count": count, "wait_ms": wait_ms}
        if columns is not None:
            body["columns"] = columns
        body.update(fields)
        return self.call("get", body, wait_ms=wait_ms, rid=rid)

    def ack(self, task, indices, lease=0, rid=None):
        return self.call("ack", {"task": task, "lease": lease, "indices": list(indices)}, rid=rid)

    def nack(self, task, indices=(), lease=0, rid=None):
        return self.call("nack", {"task": task, "lease": lease, "indices": list(indices)}, rid=rid)

    def stat(self):
        return self.call("stat")

    def meta_get(self, key):
        return self.call("meta_get", {"key": key})["value"]

    def meta_set(self, key, value, if_equals=None, rid=None):
        body = {"key": key, "value": value}
        if if_equals is not None:
            body["if_equals"] = if_equals
        return self.call("meta_set", body, rid=rid)["value"]

    def declare(self, task, columns, optional=False, rid=None):
        body = {"task": task, "columns": list(columns)}
        if optional:
            body["optional"] = True
        return self.call("declare", body, rid=rid)

    def retire(self, task, rid=None):
        return self.call("retire", {"task": task}, rid=rid)


class Pipeline:
    """Up to `window` requests in flight on one socket (rl-protocol(7),
    RELIABILITY, Several requests in flight): lane L sends under the sender id
    SENDER/L with at most one request waiting on it; rids come from one counter,
    replies are matched by rid; every request still waiting is sent again (same
    lane, same rid, next seq of its lane) after an attempt timeout, on a new
    socket. submit() then collect() in submission order."""

    def __init__(self, endpoint, window, prefix="rlp1-py-pipe", give_up_s=GIVE_UP_S,
                 attempt_timeout_s=ATTEMPT_TIMEOUT_S):
        base = Client(endpoint, prefix=prefix, give_up_s=give_up_s, attempt_timeout_s=attempt_timeout_s)
        self.client, self.window = base, window
        self.lanes = ["%s/%d" % (base.sender, lane) for lane in range(window)]
        self.lane_seq = [0] * window
        self.queue = []  # [rid, lane, frames, first_sent, deadline, reply or None], submission order
        self.last = None  # the request submitted last

    def full(self):
        return len(self.queue) >= self.window

    def _send(self, req):
        rid, lane, frames = req[0], req[1], req[2]
        self.lane_seq[lane] += 1
        frames[1] = pack({"op": frames[3], "rid": rid, "seq": self.lane_seq[lane], "from": self.lanes[lane]})
        self.client.sock.send_multipart(frames[:3], copy=False)
        req[4] = time.monotonic() + self.client.attempt_timeout_s

    def submit(self, op, body):
        busy = {req[1] for req in self.queue if req[5] is None}
        lane = min(l for l in range(self.window) if l not in busy)
        req = [self.client.new_rid(), lane, [PROTOCOL_ID, None, pack(body), OPS[op]], time.monotonic(), 0, None]
        self.queue.append(req)
        self.last = req
        self._send(req)

    def collect(self):
        """The reply of the oldest request: (status, body)."""
        backoff = BACKOFF_FIRST_S
        while self.queue[0][5] is None:
            waiting = [req for req in self.queue if req[5] is None]
            left = min(req[4] for req in waiting) - time.monotonic()
            if left > 0 and self.client.sock.poll(max(1, int(left * 1000))):
                frames = self.client.sock.recv_multipart()
                header = unpack(frames[1])
                for req in waiting:
                    if req[0] == header.get("rid"):
                        req[5] = (header["status"], unpack(frames[2], frames[3:]))
                continue
            if any(time.monotonic() - req[3] >= self.client.give_up_s for req in waiting):
                raise RLPError(UNAVAILABLE, "no reply from %s" % self.client.endpoint)
            time.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)
            self.client._connect()
            for req in waiting:  # in submission order, each on its lane with its rid
                self._send(req)
        return self.queue.pop(0)[5]

    def close(self):
        self.client.close()


def pipeline_selftest(endpoint):
    """Puts and acks through a 4-lane pipeline: each takes effect once, in order."""
    t = Checker()
    c = Client(endpoint, prefix="rlp1-pipe-selftest", give_up_s=20)
    task = "pipe-%08x" % random.getrandbits(32)
    c.declare(task, ["n"])
    p = Pipeline(endpoint, 4, give_up_s=20)
    replies = []
    for i in range(40):
        if p.full():
            replies.append(p.collect())
        p.submit("put", {"rows": [{"n": i * 3 + k} for k in range(3)]})
    while p.queue:
        replies.append(p.collect())
    indices = [i for status, body in replies for i in body.get("indices", [])]
    t.check("40 pipelined puts of 3 rows each are all answered OK",
            len(replies) == 40 and all(status == OK for status, _ in replies), repr(replies[:3]))
    t.check("their indices follow submission order", indices == sorted(indices) and len(set(indices)) == 120)
    t.check("the lanes are the sender ids SENDER/0 to SENDER/3",
            p.lanes == ["%s/%d" % (p.client.sender, lane) for lane in range(4)], repr(p.lanes))
    got = c.get(task, count=120, lease_ms=60000)
    batches = [[row["index"] for row in got["rows"]][i:i + 10] for i in range(0, 120, 10)]
    for b in batches:
        if p.full():
            replies.append(p.collect())
        p.submit("ack", {"task": task, "lease": got["lease"], "indices": b})
    acked = []
    while p.queue:
        status, body = p.collect()
        acked += body.get("acked", []) if status == OK else []
    acked += [i for status, body in replies[40:] if status == OK for i in body.get("acked", [])]
    t.check("12 pipelined acks consume the 120 rows once", sorted(acked) == sorted(indices), repr(acked[:5]))
    # The last ack sent again on its lane with its rid is a retry: the first reply, nothing acked anew.
    last = p.last
    first_reply = last[5]
    last[5] = None
    p.queue.append(last)
    p._send(last)
    status, body = p.collect()
    t.check("the last ack sent again on its lane with its rid gets the first reply",
            status == OK and body == first_reply[1], "%r, first %r" % (body, first_reply))
    st = task_of(c.stat(), task)
    t.check("the task consumed the 120 rows once", st is not None and st["consumed"] == 120, repr(st))
    p.close()
    c.retire(task)
    c.close()
    print("%d checks, %d failed" % (t.count, t.failures))
    return 1 if t.failures else 0


# --------------------------------------------------------------- selftest --

class Checker:
    def __init__(self):
        self.failures = 0
        self.count = 0

    def check(self, what, ok, detail=""):
        self.count += 1
        if ok:
            print("ok %d - %s" % (self.count, what))
        else:
            self.failures += 1
            print("FAIL %d - %s%s" % (self.count, what, (": " + detail) if detail else ""))
        sys.stdout.flush()
        return ok

    def error(self, what, status, fn):
        """Check that fn() fails with this status."""
        try:
            got = fn()
        except RLPError as e:
            return self.check(what, e.status == status,
                              "status %d %r, wanted %d" % (e.status, e.msg, status))
        return self.check(what, False, "succeeded with %r, wanted status %d" % (got, status))


def task_of(stat, name):
    for t in stat["tasks"]:
        if t["name"] == name:
            return t
    return None


def same_value(put, got):
    """A float put may come back as an integer (VALUES: integral floats)."""
    if isinstance(put, float) and isinstance(got, int) and not isinstance(got, bool):
        return float(got) == put
    return type(put) is type(got) and put == got


def same_row(put, got):
    return all(k in got and same_value(v, got[k]) for k, v in put.items())


def selftest(endpoint):
    c = Client(endpoint, prefix="rlp1-selftest", give_up_s=20)
    t = Checker()
    tag = "%08x" % random.getrandbits(32)
    task = "selftest-" + tag
    # Column names of this run only: a new task sees every live row that has
    # its columns, so on a server that is not fresh, names must not collide.
    P, I, R = "prompt-" + tag, "ids-" + tag, "reward-" + tag
    cols = [P, I, R]

    body = c.ping()
    t.check("ping replies with the server's wall clock",
            isinstance(body.get("time_ms"), int) and abs(body["time_ms"] - time.time() * 1000) < 600000,
            repr(body))
    t.check("the reply header echoes op, rid and seq and has status 0 and msg ''",
            c.last_reply_header == {"op": 1, "rid": c.rid, "seq": c.seq, "status": 0, "msg": ""},
            repr(c.last_reply_header))

    body = c.declare(task, cols)
    t.check("declare returns the task and its columns",
            body == {"task": task, "columns": cols}, repr(body))
    body = c.declare(task, cols)
    t.check("declaring the same task again with the same columns succeeds",
            body == {"task": task, "columns": cols}, repr(body))
    t.error("declaring it with other columns is a Conflict (4)", CONFLICT,
            lambda: c.declare(task, [P]))

    before = c.stat()
    group = "g-" + task  # a group name may be used only once per server
    # i64 tensors, small (inline both ways) and large (>= 4096 bytes: a blob
    # in the get reply, and sent by this client as ext type 2 in a frame).
    rows = [
        {P: "hello", I: Tensor.from_list("i64", [1, 2, 3]), R: 0.25},
        {P: "wörld", I: Tensor.from_list("i64", range(-6, 6), shape=(3, 4)), R: 2.0},
        # 8000 data bytes: sent as ext type 2 in a blob frame
        {P: "big", I: Tensor.from_list("i64", range(1000)), R: -1.5},
        {P: "g-a", I: Tensor.from_list("i64", [7]), R: 1.0, "group": group},
        {P: "g-b", I: Tensor("i64", (), struct.pack("<q", -9)), R: 0.0, "group": group},
        {P: "extra", I: Tensor.from_list("i64", []), R: 3.5},
    ]
    body = c.put(rows)
    idx = body.get("indices", [])
    t.check("put returns consecutive new indices and no rejections",
            len(idx) == len(rows) and idx == list(range(idx[0], idx[0] + len(rows)))
            and body.get("rejected") == [], repr(body))
    put_by_index = dict(zip(idx, rows))

    after = c.stat()
    st = task_of(after, task)
    t.check("stat counts the new rows",
            after["rows"] == before["rows"] + len(rows) and after["next_index"] == idx[-1] + 1,
            "rows %d -> %d, next_index %d" % (before["rows"], after["rows"], after["next_index"]))
    t.check("stat shows the rows ready for the task and one ready group",
            st is not None and st["ready"] == len(rows) and st["ready_groups"] == 1
            and st["columns"] == cols, repr(st))

    g = c.get(task, count=2, groups=True)
    grows = g.get("rows", [])
    t.check("a get with groups hands out the whole group in index order",
            [r["index"] for r in grows] == idx[3:5], repr(grows))
    t.check("group rows come back equal, with the group column",
            all(same_row(put_by_index[r["index"]], r) for r in grows), repr(grows))

    body = c.get(task, count=10)
    got = body.get("rows", [])
    t.check("the get reply has its keys in the documented order and the big tensor in a blob frame",
            list(body) == ["lease", "deadline_ms", "dropped", "regenerated", "rows"]
            and c.last_reply_blobs == 1, "%r, %d blobs" % (list(body), c.last_reply_blobs))
    t.check("a plain get hands out the other ready rows in ascending index",
            [r["index"] for r in got] == [idx[0], idx[1], idx[2], idx[5]], repr([r.get("index") for r in got]))
    t.check("row maps hold index, then the task's columns in order",
            all(list(r.keys())[:4] == ["index"] + cols for r in got), repr([list(r) for r in got]))
    ok = all(same_row(put_by_index[r["index"]], r) for r in got)
    t.check("strings, floats and tensors come back equal", ok,
            repr([(put_by_index[r["index"]], r) for r in got]))
    ids = {r["index"]: r[I] for r in got}
    t.check("the i64 tensors keep dtype, shape and bytes (incl. 2-D, 0-D, empty and a >=4096-byte blob)",
            all(isinstance(ids[i], Tensor) and ids[i].dtype == "i64" and ids[i] == put_by_index[i][I]
                for i in ids) and ids[idx[1]].shape == (3, 4) and ids[idx[2]].tolist() == list(range(1000)),
            repr(ids))
    r2 = [r for r in got if r["index"] == idx[1]][0][R]
    t.check("a float put as 2.0 comes back equal to 2 (an int, as VALUES says, or a float)",
            r2 == 2 and not isinstance(r2, bool), repr(r2))

    st = task_of(c.stat(), task)
    t.check("stat shows all rows leased, none ready",
            st["ready"] == 0 and st["leased"] == len(rows), repr(st))

    # drop_uniform: the reply counts the rows of uniform groups and sums their column
    utask = task + "-u"
    c.declare(utask, [R])
    c.put([{R: 0.75, "group": group + "-u1"}, {R: 0.75, "group": group + "-u1"},
           {R: 1.0, "group": group + "-u2"}, {R: 0.0, "group": group + "-u2"}])
    body = c.get(utask, count=4, groups=True, drop_uniform=R)
    t.check("a get that dropped a uniform group says so after regenerated: uniform and uniform_sum",
            list(body) == ["lease", "deadline_ms", "dropped", "regenerated", "uniform", "uniform_sum", "rows"]
            and body["dropped"] == 2 and body["uniform"] == 2 and body["uniform_sum"] == 1.5
            and sorted(r.get("group") for r in body["rows"]).count(group + "-u2") == 2
            and all(r.get("group") != group + "-u1" for r in body["rows"]), repr(body))

    # nack one row back, take it again under a new lease
    body = c.nack(task, [idx[5], 999999999], lease=g["lease"])
    t.check("nack under the wrong lease rejects the rows",
            body.get("released") == [] and sorted(body.get("rejected", [])) == [idx[5], 999999999], repr(body))
    body = c.nack(task, [idx[5]])
    t.check("nack under any lease releases a leased row", body == {"released": [idx[5]], "rejected": []},
            repr(body))
    again = c.get(task, count=5)
    t.check("the nacked row is handed out again",
            [r["index"] for r in again["rows"]] == [idx[5]] and again["lease"] > g["lease"], repr(again))

    all_idx = list(idx)
    body = c.ack(task, all_idx + [987654321])
    t.check("ack consumes every handed-out row and rejects a row that does not exist",
            sorted(body.get("acked", [])) == all_idx and body.get("rejected") == [987654321], repr(body))
    body = c.ack(task, idx[:2], lease=g["lease"])
    t.check("a second ack is refused: status 0, rows in rejected",
            body == {"acked": [], "rejected": idx[:2]}, repr(body))
    st = task_of(c.stat(), task)
    t.check("stat counts the consumed rows", st["consumed"] == len(rows) and st["leased"] == 0, repr(st))

    # metadata
    key = "selftest/%08x" % random.getrandbits(32)
    t.check("meta_get of a key never set is nil", c.meta_get(key) is None)
    t.check("meta_set sets a value", c.meta_set(key, "step-1") == "step-1")
    t.check("meta_get reads it back", c.meta_get(key) == "step-1")
    t.error("a meta_set whose if_equals does not match is a Conflict (4)", CONFLICT,
            lambda: c.meta_set(key, "step-3", if_equals="step-0"))
    t.check("... and sets nothing", c.meta_get(key) == "step-1")
    t.check("a meta_set whose if_equals matches sets the value",
            c.meta_set(key, "step-2", if_equals="step-1") == "step-2" and c.meta_get(key) == "step-2")

    # errors
    t.error("a get for an unknown task is NotFound (3)", NOT_FOUND, lambda: c.get("no-such-task-" + task))
    h = c.last_reply_header or {}
    t.check("the error reply echoes op, rid and seq", h.get("op") == 3 and h.get("rid") == c.rid
            and h.get("seq") == c.seq and h.get("status") == NOT_FOUND, repr(h))
    t.error("an ack for an unknown task is NotFound (3)", NOT_FOUND, lambda: c.ack("no-such-task-" + task, [0]))
    t.error("a put without rows is InvalidArgument (1)", INVALID_ARGUMENT, lambda: c.call("put", {}))
    t.error("a put of a bad tensor is a DataError (2)", DATA_ERROR,
            lambda: c.call("put", {"rows": [{P: msgpack.ExtType(1, b"\x05\x01" + struct.pack("<q", 3))}]}))
    t.error("an unknown op is a Protocol error (7)", PROTOCOL, lambda: c.call(42, {}))

    # a retried put: same rid, same reply, no new rows
    before = c.stat()
    rid = c.new_rid()
    retry_rows = [{P: "retry-me", I: Tensor.from_list("i64", [5]), R: 0.5}]
    first = c.put(retry_rows, rid=rid)
    mid = c.stat()
    second = c.put(retry_rows, rid=rid)
    third = c.put([{P: "a different body"}, {P: "is not looked at"}], rid=rid)
    after = c.stat()
    t.check("a put retried with the same rid gets the same reply",
            first == second == third and len(first["indices"]) == 1, "%r %r %r" % (first, second, third))
    t.check("... and adds no rows (stat rows and next_index unchanged)",
            mid["rows"] == before["rows"] + 1 and after["rows"] == mid["rows"]
            and after["next_index"] == mid["next_index"],
            "rows %d/%d/%d" % (before["rows"], mid["rows"], after["rows"]))
    body = c.ack(task, first["indices"])
    t.check("the retried put's row is acked", body == {"acked": first["indices"], "rejected": []}, repr(body))
    # a retried ack gets the first reply (acked), not a rejection
    rid = c.new_rid()
    put2 = c.put([{P: "p", I: Tensor.from_list("i64", [1]), R: 1.5}])
    a1 = c.ack(task, put2["indices"], rid=rid)
    a2 = c.ack(task, put2["indices"], rid=rid)
    t.check("an ack retried with the same rid gets the first reply again",
            a1 == a2 == {"acked": put2["indices"], "rejected": []}, "%r %r" % (a1, a2))

    check_refusals(t, c, endpoint, tag, P)
    check_retire_and_optional(t, c, endpoint, tag, task, P, I, R)

    c.close()
    print("%d checks, %d failed" % (t.count, t.failures))
    return 1 if t.failures else 0


def check_refusals(t, c, endpoint, tag, P):
    """Requests rl-protocol(7) says the server refuses, with the status it gives."""
    t.error("a request with rid 0 is InvalidArgument (1)", INVALID_ARGUMENT, lambda: c.call("ping", rid=0))
    t.check("... and its reply carries rid 0", (c.last_reply_header or {}).get("rid") == 0,
            repr(c.last_reply_header))
    long_sender = Client(endpoint, prefix="s" * 250, give_up_s=10)  # "PREFIX@HOST:PID:R" > 256 bytes
    t.error("a sender id over 256 bytes is InvalidArgument (1)", INVALID_ARGUMENT, long_sender.ping)
    long_sender.close()
    t.error("a declare naming the column 'index' is InvalidArgument (1)", INVALID_ARGUMENT,
            lambda: c.declare("cols-" + tag, [P, "index"]))
    t.error("a get whose columns name one twice is InvalidArgument (1)", INVALID_ARGUMENT,
            lambda: c.get("cols-" + tag, columns=[P, P]))
    t.check("... and declares nothing", task_of(c.stat(), "cols-" + tag) is None)
    t.error("a get of count 0 for an unknown task is InvalidArgument (1), not NotFound (precedence)",
            INVALID_ARGUMENT, lambda: c.get("no-such-task-" + tag, count=0))
    t.error("a nack with holder '' is InvalidArgument (1)", INVALID_ARGUMENT,
            lambda: c.call("nack", {"task": "no-such-task-" + tag, "holder": ""}))
    try:
        c.put([{P: "ok"}, {P: "bad", "version": 1.5}])
        t.check("a put with a float version is a DataError (2)", False, "it succeeded")
    except RLPError as e:
        t.check("a put with a float version is a DataError (2) naming 'row 1 column 'version''",
                e.status == DATA_ERROR and e.msg.startswith("row 1 column 'version': "), str(e))
    deep = 1
    for _ in range(8):
        deep = [deep]
    t.error("a value nested 9 deep under a key the op does not know is a Protocol error (7)", PROTOCOL,
            lambda: c.call("meta_get", {"key": "k", "extra-" + tag: deep}))


def check_retire_and_optional(t, c, endpoint, tag, task, P, I, R):
    """A task nothing consumes holds rows until it is retired; an optional one holds none."""
    audit, watch = "audit-" + tag, "watch-" + tag
    c.declare(audit, [P, "verdict-" + tag])
    body = c.declare(watch, [P], optional=True)
    t.check("declare of an optional task says optional", body.get("optional") is True, repr(body))
    put = c.put([{P: "held-%d" % i, I: Tensor.from_list("i64", [i]), R: 0.5} for i in range(2)])
    c.ack(task, put["indices"])
    stat = c.stat()
    st, wt = task_of(stat, audit), task_of(stat, watch)
    t.check("stat: the task nothing consumes holds the rows", st["holds"] >= 2 and st["optional"] is False,
            repr(st))
    t.check("stat: the optional task holds none", wt["holds"] == 0 and wt["optional"] is True, repr(wt))

    parked = {}

    def wait_for_rows():
        other = Client(endpoint, prefix="rlp1-parked", give_up_s=20)
        try:
            parked["reply"] = other.get(audit, count=1, wait_ms=10000)
        except RLPError as e:
            parked["error"] = e
        other.close()
    waiter = threading.Thread(target=wait_for_rows)
    waiter.start()
    time.sleep(0.5)
    rid = c.new_rid()
    started = time.monotonic()
    first = c.retire(audit, rid=rid)
    waiter.join()
    t.check("retire replies with the task and the rows it freed",
            first.get("task") == audit and isinstance(first.get("freed"), int), repr(first))
    err = parked.get("error")
    t.check("a get parked for the retired task is answered NotFound (3) at once",
            err is not None and err.status == NOT_FOUND and time.monotonic() - started < 5, repr(parked))
    t.check("retire retried with the same rid gets the same reply", c.retire(audit, rid=rid) == first)
    t.check("stat no longer lists the retired task", task_of(c.stat(), audit) is None)
    t.error("retiring it again is NotFound (3)", NOT_FOUND, lambda: c.retire(audit))
    c.retire(watch)


def main(argv):
    if len(argv) != 3 or argv[2] not in ("selftest", "pipeline", "ping", "stat"):
        sys.stderr.write("usage: %s ENDPOINT selftest|pipeline|ping|stat\n" % argv[0])
        return 64
    if argv[2] in ("selftest", "pipeline"):
        try:
            return (selftest if argv[2] == "selftest" else pipeline_selftest)(argv[1])
        except Exception as e:  # pylint: disable=broad-except
            print("FAIL - unexpected error: %s: %s" % (type(e).__name__, e))
            return 1
    c = Client(argv[1])
    try:
        print(c.call(argv[2]))
    except RLPError as e:
        sys.stderr.write("%s\n" % e)
        return 1
    finally:
        c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
