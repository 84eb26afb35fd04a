"""The Python client against a datagram socket standing in for the collector: no event is lost
without a count, however slow the collector, and events recorded after close still go."""

import pathlib
import socket
import struct
import sys
import threading
import time
from collections import namedtuple

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
import taskmeter_record as tm  # noqa: E402

Batch = namedtuple("Batch", "flags pid stream seq dropped count")


@pytest.fixture
def collector(tmp_path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "collector.sock"))
    yield sock
    sock.close()


def fill_queue(collector):
    """Fills the collector's receive queue with datagrams that are not batches, so that the next
    send to it waits; returns the filler, which must stay open."""
    filler = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    filler.connect(collector.getsockname())
    filler.setblocking(False)
    try:
        while True:
            filler.send(b"fill")
    except BlockingIOError:
        return filler


def read_batches(collector, finals):
    """Reads batches (skipping the filler) until `finals` final batches came; waits up to 10 s
    for each datagram."""
    collector.settimeout(10)
    batches = []
    while sum(b.flags & 1 for b in batches) < finals:
        data = collector.recv(1 << 17)
        if data[:4] == b"TMR1":
            batch = Batch(*struct.unpack_from("<6I", data, 4))
            assert len(data) == 32 + 16 * batch.count
            batches.append(batch)
    return batches


def test_events_recorded_after_close_go_at_once_on_new_streams(collector):
    rec = tm.Recorder(collector.getsockname())
    rec.record()
    rec.record_n(2)
    rec.close()  # what atexit does
    rec.record()  # e.g. a daemon thread still running after atexit
    late = threading.Thread(target=rec.start, args=(7,))
    late.start()
    late.join()
    rec.close()  # nothing left: sends nothing
    batches = read_batches(collector, finals=3)
    assert [(b.stream, b.seq, b.flags, b.count, b.dropped) for b in batches] == [
        (0, 0, 1, 2, 0),
        (1, 0, 1, 1, 0),
        (2, 0, 1, 1, 0),
    ]
    collector.setblocking(False)
    with pytest.raises(BlockingIOError):
        collector.recv(1 << 17)


def test_a_final_batch_waits_for_a_collector_whose_queue_is_full(collector):
    filler = fill_queue(collector)
    rec = tm.Recorder(collector.getsockname())
    sent = 100
    for _ in range(sent):
        rec.record()
    batches = []

    def read_late():
        time.sleep(0.1)  # the final batch's first try has timed out by now
        batches.extend(read_batches(collector, finals=1))

    reader = threading.Thread(target=read_late)
    reader.start()
    rec.close()
    reader.join()
    filler.close()
    assert sum(b.count + b.dropped for b in batches) == sent
    assert batches[-1].flags & 1 and [b.seq for b in batches] == list(range(len(batches)))


def test_a_final_batch_that_cannot_go_is_counted_by_a_header_only_final(collector):
    rec = tm.Recorder(collector.getsockname())
    rec._sock = rec._connect()
    # The smallest send buffer (about 4.5 KB) refuses a batch of 1000 events (EMSGSIZE).
    rec._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1)
    sent = 1000
    for _ in range(sent):
        rec.record()
    rec.close()
    batches = read_batches(collector, finals=1)
    assert sum(b.count + b.dropped for b in batches) == sent
    assert batches[-1].flags & 1 and batches[-1].dropped > 0
