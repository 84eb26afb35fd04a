'use strict';
/* taskmeter record() client for Node.js: report completed units of work to `taskmeter bench`.
 * Built-in modules only (Node 16+). Every call is a no-op unless TASKMETER_RECORD_STREAM names the
 * collector's SOCK_STREAM socket; the wire format is in clients/README.md. Node has no Unix
 * datagrams, so batches go back to back on one connection per thread (stream = threadId).
 *
 *   const tm = require('taskmeter-record');  // npm install PATH/clients/node
 *   tm.record();  ...  await tm.flush();  // before the program ends
 */

const net = require('net');
const { threadId } = require('worker_threads');

const MAX_EVENTS = 2048; // events per batch (the wire allows 4096)
const MAX_AGE_NS = 100000000n; // a batch whose oldest event is older goes at the next call
const MAX_QUEUED = 16 << 20; // bytes waiting on the socket; a batch beyond is dropped
const STALL_MS = 1000; // a connection whose queue moves not at all for this long is given up
const HEADER = 32;
const EVENT = 16;
const LIMIT = 2n ** 62n; // ids and n live in bits 0-61, the kind in bits 62-63
const FINAL = 1;
const now = () => process.hrtime.bigint(); // uv_hrtime: CLOCK_MONOTONIC in ns

class Recorder {
  constructor(path) {
    this.path = path;
    this.seq = 0; // of the next batch
    this.dropped = 0;
    this.socket = null;
    this.written = Promise.resolve(); // settles when the last batch written has left
    this.progress = 0; // writes completed
    this.watchdog = null;
    this.closed = false;
    this.fresh();
    // The loop is empty: the program ends normally, so send the final batch (also in Workers).
    process.on('beforeExit', () => this.close());
  }

  fresh() {
    this.buf = Buffer.allocUnsafe(HEADER + MAX_EVENTS * EVENT); // the batch is built in place
    this.view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.length);
    this.count = 0;
  }

  record() {
    const t = now();
    const off = HEADER + this.count * EVENT;
    this.view.setBigUint64(off, t, true);
    this.view.setUint32(off + 8, 1, true); // kind 0, n = 1
    this.view.setUint32(off + 12, 0, true);
    this.added(t);
  }

  recordN(n) {
    this.add(0, n, 1, now());
  }

  start(id) {
    this.add(1, id, 0, now());
  }

  complete(id) {
    this.add(2, id, 0, now());
  }

  // Writes kind and value (a safe integer or a BigInt below 2^62) of the event at the call.
  add(kind, value, min, t) {
    const off = HEADER + this.count * EVENT;
    if (typeof value === 'bigint') {
      if (value < BigInt(min) || value >= LIMIT) throw new RangeError(`taskmeter: ${value} is out of range`);
      this.view.setBigUint64(off + 8, (BigInt(kind) << 62n) | value, true);
    } else {
      if (!Number.isSafeInteger(value) || value < min) throw new RangeError(`taskmeter: ${value} is out of range`);
      this.view.setUint32(off + 8, value % 2 ** 32, true);
      this.view.setUint32(off + 12, Math.floor(value / 2 ** 32) + kind * 2 ** 30, true);
    }
    this.view.setBigUint64(off, t, true);
    this.added(t);
  }

  added(t) {
    if (this.count++ === 0) this.due = t + MAX_AGE_NS;
    if (this.count === MAX_EVENTS || t > this.due) this.send(0);
  }

  flush() {
    if (this.count || this.dropped) this.send(0);
    return this.written;
  }

  close() {
    if (this.closed) return;
    this.send(FINAL);
    this.closed = true;
    if (this.socket) this.socket.end();
  }

  send(flags) {
    const count = this.count;
    const batch = this.buf.subarray(0, HEADER + count * EVENT);
    this.fresh();
    if (this.closed) return;
    const socket = this.socket || this.connect();
    if (socket.writableLength + batch.length > MAX_QUEUED) {
      this.dropped += count; // the collector is too slow: count, never grow without bound
      return;
    }
    const dropped = Math.min(this.dropped, 0xffffffff);
    batch.write('TMR1', 0, 'latin1');
    batch.writeUInt32LE(flags, 4);
    batch.writeUInt32LE(process.pid, 8);
    batch.writeUInt32LE(threadId, 12);
    batch.writeUInt32LE(this.seq, 16);
    batch.writeUInt32LE(dropped, 20);
    batch.writeUInt32LE(count, 24);
    batch.writeUInt32LE(0, 28);
    this.seq = (this.seq + 1) >>> 0;
    this.dropped -= dropped;
    this.unconnected += count + dropped;
    this.written = new Promise((resolve) => socket.write(batch, () => {
      this.progress++;
      resolve();
    }));
    if (socket.writableLength && !this.watchdog) this.watch();
  }

  // Queued writes keep the program alive, so a collector that stopped reading would keep it
  // running for ever: give the connection up when its queue has not moved for STALL_MS.
  watch() {
    const seen = this.progress;
    this.watchdog = setTimeout(() => {
      this.watchdog = null;
      const socket = this.socket;
      if (!socket || !socket.writableLength) return;
      if (this.progress === seen) socket.destroy(); // `lost` below takes it from there
      else this.watch();
    }, STALL_MS).unref();
  }

  connect() {
    const socket = net.createConnection(this.path);
    socket.unref(); // an idle connection does not keep the program alive (pending writes do)
    const first = this.seq;
    let connected = false;
    this.unconnected = 0; // events (and dropped counts) written to this socket before it connects
    socket.on('connect', () => (connected = true));
    const lost = () => {
      if (this.socket !== socket) return;
      this.socket = null; // reconnect at the next batch
      if (!connected) {
        // Never connected (ENOENT, ECONNREFUSED): nothing arrived, so its batches are dropped
        // and their seq numbers reused. A connection that breaks later loses an unknown part
        // of its queue; the collector sees that as a gap in seq.
        this.seq = first;
        this.dropped += this.unconnected;
      }
    };
    socket.on('error', lost);
    socket.on('close', lost);
    return (this.socket = socket);
  }
}

const noop = () => {};
const NULL = {
  record: noop, recordN: noop, start: noop, complete: noop, flush: () => Promise.resolve(),
};

let client = null; // created at the first call, from the environment
let until = null;

function get() {
  if (client === null) {
    const path = process.env.TASKMETER_RECORD_STREAM;
    client = path ? new Recorder(path) : NULL;
  }
  return client;
}

/** One unit of work completed, now. */
exports.record = () => (client || get()).record();
/** n units completed, now (1 <= n < 2^62; a Number or a BigInt). */
exports.recordN = (n) => (client || get()).recordN(n);
/** The unit `id` (0 <= id < 2^62) started, now. */
exports.start = (id) => (client || get()).start(id);
/** The unit `id` completed, now; counts as one completed unit. */
exports.complete = (id) => (client || get()).complete(id);
/** Sends what is buffered; resolves once the kernel has it (or the connection is lost). */
exports.flush = () => (client || get()).flush();
/** True until the measurement window ends (TASKMETER_RECORD_UNTIL); always true without it. */
exports.running = () => {
  if (until === null) {
    const value = process.env.TASKMETER_RECORD_UNTIL;
    until = /^[0-9]+$/.test(value) ? BigInt(value) : 2n ** 64n; // unset: never reached
  }
  return now() < until;
};
