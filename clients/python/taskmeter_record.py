"""taskmeter record() client: report completed units of work to `taskmeter bench`.

Standard library only (Python 3.8+). Every call is a no-op unless TASKMETER_RECORD names the
collector's SOCK_DGRAM socket; the wire format is in clients/README.md. Thread-safe: the process
sends one stream at a time (0 until the final batch at exit, then a new one per later event).

    import taskmeter_record as tm
    tm.record()           # one unit of work completed now
    tm.start(7); ...; tm.complete(7)
"""

import atexit
import os
import socket
import struct
import threading
from collections import deque
from itertools import chain
from time import monotonic, monotonic_ns

__version__ = "0.1.0"  # the package's version (pyproject.toml reads it from here)

MAX_EVENTS = 2048  # events per batch (the wire allows 4096)
MAX_AGE_NS = 100_000_000  # a batch whose oldest event is older than this goes at the next call
SEND_TIMEOUT = 0.010  # a send never blocks the program longer; then the batch is dropped
FINAL_PATIENCE = 1.0  # a final batch waits this long for a full queue (no later batch carries it)
_HEADER = struct.Struct("<4s7I")
_LIMIT = 1 << 62  # ids and n live in bits 0-61, the kind in bits 62-63
_START, _COMPLETE = 1 << 62, 2 << 62
_FINAL = 1


class Recorder:
    """One stream of batches to the collector at `path`."""

    def __init__(self, path):
        self._path = path
        self._pid = os.getpid()
        # Callers append (t, word) without a lock: deque.append and popleft are atomic, so a
        # sender takes the oldest events while others keep appending, and none is lost.
        self._queue = deque()
        self._lock = threading.Lock()  # one sender at a time: seq reaches the socket in order
        self._stream = 0
        self._seq = 0
        self._dropped = 0
        self._sock = None
        self._closed = False  # after close nothing flushes: each later event goes at once

    def record(self):
        self._add(monotonic_ns(), 1)

    def record_n(self, n):
        t = monotonic_ns()
        if not 0 < n < _LIMIT:
            raise ValueError("record_n: n must be in 1..2**62-1")  # n = 0 would spoil the batch
        self._add(t, n)

    def start(self, unit_id):
        t = monotonic_ns()
        if not 0 <= unit_id < _LIMIT:
            raise ValueError("start: id must be in 0..2**62-1")
        self._add(t, _START | unit_id)

    def complete(self, unit_id):
        t = monotonic_ns()
        if not 0 <= unit_id < _LIMIT:
            raise ValueError("complete: id must be in 0..2**62-1")
        self._add(t, _COMPLETE | unit_id)

    def _add(self, t, word):
        queue = self._queue
        queue.append((t, word))
        if self._closed:  # read after the append: close sets it before it takes the queue
            with self._lock:
                if queue:
                    self._send_all(_FINAL)  # as the final batch of a new stream
            return
        try:
            due = len(queue) >= MAX_EVENTS or t - queue[0][0] > MAX_AGE_NS
        except IndexError:  # another thread has just sent everything
            return
        if due:
            with self._lock:
                self._send_due()

    def flush(self):
        """Send what is buffered now (and any count of dropped events)."""
        with self._lock:
            self._send_all(0)

    def close(self):
        """Send the final batch. Runs at exit for the default client; as nothing flushes after
        it, each later event is sent at once, as the final batch of a new stream."""
        with self._lock:
            if self._closed and not (self._queue or self._dropped):
                return  # closed already, and every later event has gone
            self._closed = True
            self._send_all(_FINAL)
            if self._sock is not None:
                self._sock.close()
                self._sock = None

    # The three senders below run under the lock; only they pop from the queue.

    def _send_due(self):
        # One batch if full or overdue (another thread may have sent it meanwhile), so a caller
        # never sends for longer than one send timeout.
        queue = self._queue
        n = min(len(queue), MAX_EVENTS)
        if n == MAX_EVENTS or (n and monotonic_ns() - queue[0][0] > MAX_AGE_NS):
            self._send_batch(n, 0)

    def _send_all(self, flags):
        n = len(self._queue)  # not what other threads append meanwhile: a flush ends
        while n > MAX_EVENTS:
            self._send_batch(MAX_EVENTS, 0)
            n -= MAX_EVENTS
        self._send_batch(n, flags)

    def _send_batch(self, count, flags):
        pop = self._queue.popleft
        events = [pop() for _ in range(count)]
        if not (count or self._dropped or flags):
            return
        body = struct.pack(f"<{2 * count}Q", *chain.from_iterable(events))
        if not flags & _FINAL:
            self._send(flags, count, body, SEND_TIMEOUT)
            return
        # No later batch of this stream can carry a final batch's count: it waits for a full
        # queue, and if its events still cannot go, a header-only final batch counts them.
        deadline = monotonic() + FINAL_PATIENCE
        if not self._send(flags, count, body, FINAL_PATIENCE):
            self._send(flags, 0, b"", max(deadline - monotonic(), SEND_TIMEOUT))
        # A later event opens a new stream.
        self._stream, self._seq = (self._stream + 1) & 0xFFFFFFFF, 0

    def _send(self, flags, count, body, timeout):
        """One datagram; True if it went, else its events are counted as dropped."""
        dropped = min(self._dropped, 0xFFFFFFFF)
        header = _HEADER.pack(b"TMR1", flags, self._pid, self._stream, self._seq, dropped, count, 0)
        try:
            if self._sock is None:
                self._sock = self._connect()
            # A connected datagram socket waits (polls, up to the timeout) while the collector's
            # queue is full, and fails at once when the collector is gone.
            if self._sock.gettimeout() != timeout:
                self._sock.settimeout(timeout)
            self._sock.sendmsg((header, body))  # one datagram
        except OSError as e:
            # Collector gone (ENOENT, ECONNREFUSED) or too slow: count, never raise.
            self._dropped += count
            if not isinstance(e, socket.timeout) and self._sock is not None:
                self._sock.close()
                self._sock = None  # reconnect at the next batch
            return False
        self._seq = (self._seq + 1) & 0xFFFFFFFF
        self._dropped -= dropped
        return True

    def _connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        return s


class _Null:
    """The client without taskmeter: every call does nothing."""

    def _nothing(self, *args):
        pass

    record = record_n = start = complete = flush = close = _nothing


_client = None  # the default client, created at the first call
_client_lock = threading.Lock()
_until = None


def _default():
    global _client
    with _client_lock:
        if _client is None:
            path = os.environ.get("TASKMETER_RECORD")
            _client = Recorder(path) if path else _Null()
        return _client


def _at_exit():
    if _client is not None:
        _client.close()


def _after_fork():
    # The child is a new pid with its own stream; the parent sends what was buffered before.
    global _client, _client_lock
    _client, _client_lock = None, threading.Lock()


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def record():
    """One unit of work completed, now."""
    (_client or _default()).record()


def record_n(n):
    """n units of work completed, now (1 <= n < 2**62)."""
    (_client or _default()).record_n(n)


def start(unit_id):
    """The unit `unit_id` (0 <= id < 2**62) started, now."""
    (_client or _default()).start(unit_id)


def complete(unit_id):
    """The unit `unit_id` completed, now; counts as one completed unit."""
    (_client or _default()).complete(unit_id)


def flush():
    """Send what is buffered now (also done when a batch is full, and at exit)."""
    (_client or _default()).flush()


def running():
    """True until the measurement window ends (TASKMETER_RECORD_UNTIL); always true without it."""
    global _until
    if _until is None:
        try:
            _until = int(os.environ["TASKMETER_RECORD_UNTIL"])
        except (KeyError, ValueError):
            _until = 1 << 64  # never reached
    return monotonic_ns() < _until
