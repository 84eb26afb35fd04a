'use strict';
/* taskmeter Node.js driver, worker protocol v6 (protocol/README.md), run by Node, Bun
 * (drivers/bun) or Deno (drivers/deno). Runtime "node" ("bun", "deno"): one async function (a
 * promise chain) per unit on the main event loop; "node-worker" ("bun-worker", "deno-worker"): one
 * worker_threads Worker per unit (this file, role "unit"). The units' cells and rings live in one
 * SharedArrayBuffer, which the writer (this file, role "writer") appends to the sample file
 * (fd 3) as S frames; a unit that finds its ring full appends it there itself as an F frame.
 * Linux only. */

const fs = require('fs');
const os = require('os');
const readline = require('readline');
const v8 = require('v8');
const { isMainThread, parentPort, workerData, Worker } = require('worker_threads');
const { monitorEventLoopDelay } = require('perf_hooks');
const { setTimeout: delay, setImmediate: immediate } = require('timers/promises');

// ---------- the host: Node, Bun or Deno ----------

// The JavaScript runtime running this file, which serves its two runtime ids: units on the main
// event loop (HOST) or one Worker each (HOST-worker). Their Node APIs differ in the few places below.
const PROTOCOL = 6; // the worker protocol this driver speaks: the plan's, and H's
const HOST = typeof Bun !== 'undefined' ? 'bun' : typeof Deno !== 'undefined' ? 'deno' : 'node';
const HOST_VERSION = { node: () => process.version, bun: () => Bun.version, deno: () => Deno.version.deno }[HOST]();
const HOST_NAME = { node: 'Node', bun: 'Bun', deno: 'Deno' }[HOST];
const RUNTIMES = [HOST, `${HOST}-worker`];
/** Whether a runtime's units are promise chains on the main event loop (else Workers). */
const onLoop = (runtime) => runtime === HOST;

/* CLOCK_MONOTONIC in nanoseconds, as a BigInt. Node's process.hrtime is uv_hrtime, that clock;
   Bun's and Deno's count from the process's start, so they call clock_gettime through their FFI
   (bun:ffi, Deno.dlopen: ~80-120 ns a call here, as hrtime). */
const now = (() => {
  if (HOST === 'node') return () => process.hrtime.bigint();
  const CLOCK_MONOTONIC = 1;
  const ts = new BigInt64Array(2); // struct timespec: tv_sec, tv_nsec
  const clock = HOST === 'bun'
    ? require('bun:ffi').dlopen('libc.so.6', { clock_gettime: { args: ['i32', 'ptr'], returns: 'i32' } })
    : Deno.dlopen('libc.so.6', { clock_gettime: { parameters: ['i32', 'buffer'], result: 'i32' } });
  const gettime = clock.symbols.clock_gettime;
  return () => {
    gettime(CLOCK_MONOTONIC, ts);
    return ts[0] * 1000000000n + ts[1];
  };
})();

/** A promise that resolves after `ms` whole milliseconds on the thread's event loop: the host's
    own timer (Node's timers/promises, Bun.sleep, Deno's setTimeout). Each truncates a fraction. */
const timer = {
  node: delay,
  bun: (ms) => Bun.sleep(ms),
  deno: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
}[HOST];

/** The sample file, fd 3, for fs.writeSync. Deno's node:fs takes only descriptors it opened
    itself: each thread opens the file again for appending through /proc (the same file; every
    write still appends whole). */
let sampleFd = null;
const sampleFile = () => (sampleFd ??= HOST === 'deno' ? fs.openSync('/proc/self/fd/3', 'a') : 3);

// ---------- the protocol's layout ----------

// Control cells shared by every thread: a BigInt64Array, so that Atomics.wait works on each.
const [STOP, GO, WRITE, STARTED, ENDED, ALL_ENDED] = [0, 1, 2, 3, 4, 5];
const [SUM, BUSY, HAS_BUSY, INTERRUPTED, END] = [6, 7, 8, 9, 10];
// Each unit's cells, 8 u64 (a cache line); all units' cells come first, then all their rings.
const [HEAD, TAIL, ORIGIN, ITERATIONS, MEASURED, LOST, CELLS] = [0, 1, 2, 3, 4, 5, 8];
const SAMPLE = 4; // u64 a sample: start, busy_end, intended, wake
const SAMPLE_BYTES = SAMPLE * 8;
const RING_HEAD = 5 + 24; // an S or F frame's header and its unit, count, origin, first
const CHUNK = 4 << 20; // bytes a write at most (to the sample file: whole frames, one may be larger)
const MAX_TIMEOUT_MS = 2147483647; // setTimeout turns anything longer into 1 ms
const START_WINDOW = 4; // node-worker: Workers starting at once (each takes ~18 ms of CPU)
const MEM_FLOOR = 0.2; // start no unit once MemAvailable is below this share of MemTotal
const NODE_CHECK_EVERY = 1024; // node: units started between two memory checks

/** The plan, times as BigInt. The orchestrator has validated it: every integer is below 2^53. */
const setup = (raw) => ({
  runtime: raw.runtime, units: raw.units, classes: raw.classes, ring: raw.ring,
  atomic: raw.experiment === 'atomic-sum', absolute: raw.mode === 'absolute', kind: raw.schedule,
  sleeps: raw.schedule !== 'none', ns: BigInt(raw.sleep_ns), m: BigInt(raw.modulo),
  iters: BigInt(raw.busy_iters), yield: raw.busy_yield, warmup: BigInt(raw.warmup_ns),
  duration: BigInt(raw.duration_ns), startLimit: BigInt(raw.start_limit_ns), flushMs: raw.flush_ns / 1e6,
  maxMapCount: raw.max_map_count, // vm.max_map_count as the orchestrator read it; null when unknown
  roomThreads: raw.room_threads, roomThreadsWhy: raw.room_threads_why, // the machine's room; null when unknown
});

/** The units' cells and rings in the shared memory (the rings also as bytes, for frames). */
const views = (sab, plan) => ({
  cells: new BigInt64Array(sab, 0, plan.units * CELLS),
  samples: new BigInt64Array(sab, plan.units * CELLS * 8),
  bytes: Buffer.from(sab, plan.units * CELLS * 8),
});

// ---------- measurement ----------

/** The schedule's sleep for unit u (1-based BigInt) in period k (0-based); BigInt nanoseconds. */
function expected(plan, u, k) {
  switch (plan.kind) {
    case 'fixed': return plan.ns;
    case 'by-unit': return u * plan.ns;
    default: return ((k % plan.m) + 1n) * plan.ns;
  }
}

/* The protocol's busy work on an unsigned 64-bit integer. V8 does not fold BigInt arithmetic,
   and the result is reported, so every step runs. */
function busy(iters) {
  let total = 0n;
  for (let i = 0n; i < iters; i++) {
    total = BigInt.asUintN(64, total + 1n);
    total = BigInt.asUintN(64, total * 3n) / 2n;
  }
  return total;
}

/** The same, yielding to the event loop (a setImmediate turn) after every step. */
async function busyYielding(iters) {
  let total = 0n;
  for (let i = 0n; i < iters; i++) {
    total = BigInt.asUintN(64, total + 1n);
    total = BigInt.asUintN(64, total * 3n) / 2n;
    await immediate();
  }
  return total;
}

/** Writes every byte of unit u's ring before the gate: a fresh buffer is zero pages, faulted in
    on first write, and the loop must not take a page fault. */
function prepareRing(env, u) {
  const base = (u - 1) * env.plan.ring * SAMPLE;
  env.samples.fill(-1n, base, base + env.plan.ring * SAMPLE);
}

/* The work loop of the protocol README, line for line, run once the gate is open. `env` holds
   the plan, the shared cells and the two sleeps; a sleep returns a promise (node) or nothing (it
   has already slept, node-worker). */
async function runUnit(u, env) {
  const { plan, ctl, cells, samples, sleepFor, sleepUntil, recipe } = env;
  const bu = BigInt(u);
  const c = (u - 1) * CELLS;
  const ring = plan.ring;
  const base = (u - 1) * ring * SAMPLE;
  const end = Atomics.load(ctl, END);
  const measureStart = end - plan.duration;
  const origin = now();
  Atomics.store(cells, c + ORIGIN, origin);
  let k = 0n;
  let n = 0;
  let measured = 0;
  let lost = 0;
  let head = 0;
  let busyResult = null;
  let next = plan.sleeps ? origin + expected(plan, bu, 0n) : 0n;
  for (;;) {
    const t0 = now();
    if (t0 >= end) break;
    if (Atomics.load(ctl, STOP)) {
      Atomics.store(ctl, INTERRUPTED, 1n);
      break;
    }
    let t1 = t0;
    if (plan.iters > 0n) {
      busyResult = plan.yield ? await busyYielding(plan.iters) : busy(plan.iters);
      t1 = now();
    }
    let intended;
    let t2;
    if (!plan.sleeps) {
      await immediate(); // the same yield as busy_yield's
    } else {
      const e = expected(plan, bu, k);
      let pending;
      if (plan.absolute) {
        intended = next;
        pending = recipe ? recipe(next) : sleepUntil(next);
      } else {
        intended = t1 + e;
        pending = recipe ? recipe(intended) : sleepFor(e); // a recipe waits until a deadline
      }
      if (pending) await pending;
      t2 = now();
      k++;
      if (plan.absolute) { // skips the deadlines the wake passed (the orchestrator counts them from it)
        next += expected(plan, bu, k);
        if (t2 > next) {
          // The rule below steps once per skipped period, and a saturated event loop (100,000
          // units) overruns by hundreds. Whole cycles of the schedule (m periods of modulo, one
          // otherwise) sum to the same wherever they start, so those are taken at once.
          const steps = plan.kind === 'modulo' ? plan.m : 1n;
          const cycle = plan.kind === 'modulo' ? (plan.ns * plan.m * (plan.m + 1n)) / 2n : expected(plan, bu, 0n);
          const cycles = (t2 - next) / cycle;
          k += cycles * steps;
          next += cycles * cycle;
        }
        while (t2 > next) {
          k++;
          next += expected(plan, bu, k);
        }
      }
    }
    if (plan.atomic) Atomics.add(ctl, SUM, 1n); // sequentially consistent
    n++;
    if (t0 >= measureStart) measured++;
    if (plan.sleeps) { // into the ring, after writing it out first if the writer fell behind
      if (head - Number(Atomics.load(cells, c + TAIL)) === ring) lost += writeOwnRing(env, u, origin, head);
      const i = base + (head % ring) * SAMPLE;
      samples[i] = t0;
      samples[i + 1] = t1;
      samples[i + 2] = intended;
      samples[i + 3] = t2;
      Atomics.store(cells, c + HEAD, BigInt(++head));
    }
  }
  Atomics.store(cells, c + ITERATIONS, BigInt(n));
  Atomics.store(cells, c + MEASURED, BigInt(measured));
  Atomics.store(cells, c + LOST, BigInt(lost));
  if (busyResult !== null) {
    Atomics.store(ctl, BUSY, busyResult);
    Atomics.store(ctl, HAS_BUSY, 1n);
  }
  // The last unit to end wakes the writer for its final drain.
  if (Atomics.add(ctl, ENDED, 1n) + 1n === Atomics.load(ctl, STARTED)) {
    Atomics.store(ctl, ALL_ENDED, 1n);
    Atomics.notify(ctl, ALL_ENDED);
  }
}

// The F frame of this thread's units, made at the first full ring and reused: a unit fills and
// writes it without awaiting, so the units of one event loop can share it.
let ownFrame = null;

/** Unit u's ring is full: it takes the samples (moves TAIL to head, unless the writer took them
    meanwhile and there is room) and appends them to the sample file as one F frame, so none is
    lost however long the writer waits for a CPU. Returns the samples lost: those of a failed write. */
function writeOwnRing(env, u, origin, head) {
  const { plan, cells } = env;
  const c = (u - 1) * CELLS;
  const tail = Atomics.load(cells, c + TAIL);
  // Tail moved (to head when the writer took all): the writer took them since, and there is room.
  if (tail === BigInt(head) || Atomics.compareExchange(cells, c + TAIL, tail, BigInt(head)) !== tail) return 0;
  // The slots stay this unit's until it puts the next sample: the copy is whole.
  ownFrame ??= Buffer.allocUnsafe(RING_HEAD + plan.ring * SAMPLE_BYTES);
  const size = ringFrame(ownFrame, 'F', env, u, origin, Number(tail), head);
  try {
    writeSamples(ownFrame.subarray(0, size));
    return 0;
  } catch {
    return head - Number(tail);
  }
}

// node, bun, deno: the host's timer takes whole milliseconds; the delay is rounded up (Node and
// Deno make a delay below 1 ms 1 ms; Bun.sleep returns at once).
async function timeoutSleep(ns) {
  let ms = ns > 0n ? (ns + 999999n) / 1000000n : 0n;
  do {
    const step = ms > BigInt(MAX_TIMEOUT_MS) ? MAX_TIMEOUT_MS : Number(ms);
    await timer(step);
    ms -= BigInt(step);
  } while (ms > 0n);
}

/* The -worker runtimes: Atomics.wait takes fractional milliseconds. V8 truncates them to whole
   microseconds, adds them to its own clock (CLOCK_MONOTONIC truncated to the microsecond, so up
   to 999 ns behind ours) and returns once that clock reaches the sum: a wait of exactly
   ceil(ns / 1 us) could end up to 999 ns early (seen: 1 us asked, 0.21 us slept). So the wait is
   ns + 999 rounded up to whole microseconds; the extra half microsecond only keeps the double
   from falling below that whole number (V8 truncates it away). Bun's JavaScriptCore returned
   none early unpadded, and the padding costs it at most 2 us. */
function waitSleep(cell, ns) {
  const ms = ns <= 0n ? 0 : (Number((ns + 999n + 999n) / 1000n) + 0.5) / 1000;
  Atomics.wait(cell, 0, 0, ms);
}

// ---------- wait recipes ----------

/* Wait recipes (protocol: "Wait recipes"): other ways for a unit to wait until an absolute
   CLOCK_MONOTONIC deadline (a BigInt of ns, as now() reads it), each a function to copy into a
   program; each returns a promise. The plan's "wait" names one, among its runtime's. */

/** The host's timer (timers/promises setTimeout, Bun.sleep, Deno's setTimeout) for what is left,
    in whole ms rounded up, and again for what is still left when it fired early (Node's can, by
    up to 1 ms). */
async function timerUntil(deadline) {
  for (let left = deadline - now(); left > 0n; left = deadline - now()) await timeoutSleep(left);
}

/** setImmediate turns until the deadline: the loop's other callbacks (other units, I/O) run in
    between; the thread stays busy when there are none. */
async function immediateSpinUntil(deadline) {
  while (now() < deadline) await immediate();
}

/** Bun.sleepSync for what is left, in whole ms rounded up (it truncates), and again when it woke
    early: it blocks the thread, so only a Worker may wait with it. */
async function sleepSyncUntil(deadline) {
  for (let left = deadline - now(); left > 0n; left = deadline - now()) Bun.sleepSync(Number((left + 999999n) / 1000000n));
}

// How long before the deadline hybridUntil stops sleeping: a libuv timer counts whole ms from
// a clock truncated to the ms, so it fires up to about 1 ms off either way; Bun's fires 0.1 ms
// late; Deno's 1-1.2 ms late.
const HYBRID_MARGIN_NS = HOST === 'deno' ? 3000000n : 2000000n;

/** setTimeout until HYBRID_MARGIN_NS before the deadline, then immediateSpinUntil. */
async function hybridUntil(deadline) {
  if (deadline - HYBRID_MARGIN_NS > now()) await timeoutSleep(deadline - HYBRID_MARGIN_NS - now());
  await immediateSpinUntil(deadline);
}

// Per runtime, none a copy of its own sleep: node, bun and deno sleep with the host's timer
// already; the -worker runtimes with Atomics.wait, which node, bun and deno leave out (on the main
// thread it blocks the loop every unit shares), as bun leaves out Bun.sleepSync.
const spins = [['immediate-spin', immediateSpinUntil], ['hybrid', hybridUntil]];
const RECIPES = {
  node: new Map(spins),
  'node-worker': new Map([['timers-promises', timerUntil], ...spins]),
  bun: new Map(spins),
  'bun-worker': new Map([['bun-sleep', timerUntil], ['sleep-sync', sleepSyncUntil], ...spins]),
  deno: new Map(spins),
  'deno-worker': new Map([['set-timeout', timerUntil], ...spins]),
};

/** The plan's recipe: null for the runtime's own sleep, undefined for one it does not have. */
const recipeOf = (raw) => (raw.wait === undefined || raw.wait === 'sleep' ? null : RECIPES[raw.runtime].get(raw.wait));

// ---------- output ----------

/** Writes all of buf to stdout, CHUNK bytes at most a write (fd 1 may be a non-blocking pipe). */
function writeAll(buf) {
  for (let off = 0; off < buf.length;) {
    try {
      off += fs.writeSync(1, buf, off, Math.min(buf.length - off, CHUNK));
    } catch (err) {
      if (err.code !== 'EAGAIN') throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
    }
  }
}

/** Starts a frame in buf: kind, u32 length of the payload. */
function putHead(buf, kind, length) {
  buf[0] = kind.charCodeAt(0);
  buf.writeUInt32LE(length, 1);
}

/** A JSON frame. */
function frame(kind, text) {
  const bytes = Buffer.from(text);
  const out = Buffer.allocUnsafe(5 + bytes.length);
  putHead(out, kind, bytes.length);
  bytes.copy(out, 5);
  return out;
}

/** Unit u's U frame from its cells at c: 36 bytes, unit (u32), then origin, iterations, measured
    iterations and lost (u64; the cells' signed words have the same bytes). */
function unitEnd(u, cells, c) {
  const out = Buffer.allocUnsafe(5 + 36);
  putHead(out, 'U', 36);
  out.writeUInt32LE(u, 5);
  [ORIGIN, ITERATIONS, MEASURED, LOST].forEach((cell, i) => out.writeBigInt64LE(cells[c + cell], 9 + 8 * i));
  return out;
}

/** Puts the samples of unit u at positions tail..head-1 at the start of out as one frame of `kind`
    (S or F), copied in two pieces where they wrap round the ring's end; returns its size. */
function ringFrame(out, kind, { plan, bytes }, u, origin, tail, head) {
  const count = head - tail;
  putHead(out, kind, RING_HEAD - 5 + count * SAMPLE_BYTES);
  out.writeUInt32LE(u, 5);
  out.writeUInt32LE(count, 9);
  out.writeBigUInt64LE(origin, 13);
  out.writeBigUInt64LE(BigInt(tail), 21);
  const ring = (u - 1) * plan.ring * SAMPLE_BYTES;
  const slot = tail % plan.ring;
  const before = Math.min(count, plan.ring - slot); // up to the ring's end
  const at = ring + slot * SAMPLE_BYTES;
  bytes.copy(out, RING_HEAD, at, at + before * SAMPLE_BYTES);
  bytes.copy(out, RING_HEAD + before * SAMPLE_BYTES, ring, ring + (count - before) * SAMPLE_BYTES);
  return RING_HEAD + count * SAMPLE_BYTES;
}

/** Appends whole frames to the sample file in ONE write(2), so frames the writer and units write
    at once never interleave. A short write fails: its rest would not follow it in the file. */
function writeSamples(buf) {
  const n = fs.writeSync(sampleFile(), buf);
  if (n !== buf.length) throw new Error(`the sample file took ${n} of ${buf.length} bytes`);
}

/* The writer: parked until G is out; then every flush_ns, or once every unit has ended, it copies
   what each ring holds into an S frame and moves TAIL past it with a compare-and-swap, which
   fails when the unit took those samples itself meanwhile (its ring was full): then the copy is
   thrown away. The frames go to the sample file in writes of whole frames. After the units have
   ended, one last drain and it exits. */
function writerMain({ raw, ctl: ctlBuffer, sab }) {
  // Its name lets the orchestrator find this thread and run it above the units.
  try { fs.writeFileSync('/proc/thread-self/comm', 'tm-writer'); } catch { /* then it says so */ }
  const plan = setup(raw);
  const ctl = new BigInt64Array(ctlBuffer);
  const env = { plan, ...views(sab, plan) };
  const { cells } = env;
  parentPort.postMessage('ready');
  Atomics.wait(ctl, WRITE, 0n);
  const units = Number(ctl[STARTED]);
  for (;;) {
    Atomics.wait(ctl, ALL_ENDED, 0n, plan.flushMs);
    const last = Atomics.load(ctl, ALL_ENDED) !== 0n; // read before the drain, which then takes all
    let frames = [];
    let size = 0;
    for (let c = 0, u = 1; u <= units; u++, c += CELLS) {
      const tail = Atomics.load(cells, c + TAIL);
      const head = Atomics.load(cells, c + HEAD);
      if (head === tail) continue;
      const out = Buffer.allocUnsafe(RING_HEAD + Number(head - tail) * SAMPLE_BYTES);
      ringFrame(out, 'S', env, u, cells[c + ORIGIN], Number(tail), Number(head));
      if (Atomics.compareExchange(cells, c + TAIL, tail, head) !== tail) continue; // the unit took them
      frames.push(out);
      size += out.length;
      if (size >= CHUNK) {
        writeSamples(Buffer.concat(frames));
        [frames, size] = [[], 0];
      }
    }
    if (size) writeSamples(Buffer.concat(frames));
    if (last) return;
  }
}

// ---------- priority classes ----------

/** Of /proc/thread-self/stat: field 1 the thread id, 19 its nice value, 40 its real-time priority,
    41 its policy. The name (field 2) may hold spaces and ')'. */
function threadStat() {
  const text = fs.readFileSync('/proc/thread-self/stat', 'latin1');
  const field = text.slice(text.lastIndexOf(')') + 2).split(' ').map(Number); // fields 3, 4, ...
  return { tid: Number.parseInt(text, 10), nice: field[16], rtPriority: field[37], policy: field[38] };
}

/** H.priority, and the nice value of the low class (null: nothing is applied). */
function priorityPlan(plan) {
  if (plan.classes === 1) return { text: 'none', lowNice: null };
  if (onLoop(plan.runtime))
    return { text: 'none: the units are promise chains on one event loop, which has no priorities', lowNice: null };
  const self = threadStat(); // the main thread's: the workers inherit its nice value and policy
  const policy = ['SCHED_OTHER', 'SCHED_FIFO', 'SCHED_RR', 'SCHED_BATCH', 'SCHED_ISO', 'SCHED_IDLE'][self.policy] ||
    `policy ${self.policy}`;
  if (self.policy === 1 || self.policy === 2) {
    return { text: `none: the threads run under ${policy} priority ${self.rtPriority}, and ${HOST_NAME} has no API for ` +
      'real-time priorities, so both classes keep it', lowNice: null };
  }
  const low = Math.min(19, self.nice + 10);
  return { text: `nice: high ${self.nice}, low ${low} under ${policy} (os.setPriority on each low-class worker's ` +
    'thread id, read back from /proc/thread-self/stat)', lowNice: low };
}

/** In a low-class Worker: nices its own thread (PRIO_PROCESS with a tid is that thread only) and
    checks that the kernel has it. */
function applyNice(u, low) {
  const { tid } = threadStat();
  os.setPriority(tid, low);
  const got = threadStat().nice;
  if (got !== low) throw new Error(`unit ${u}: os.setPriority(${tid}, ${low}) left the thread's nice value at ${got}`);
}

// ---------- starting units ----------

/** Why no more units may be started, or null: MemAvailable below MEM_FLOOR of MemTotal. */
function memoryShortage() {
  const text = fs.readFileSync('/proc/meminfo', 'latin1');
  const mib = (name) => Math.round(Number((new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text) || [])[1]) / 1024);
  const [total, available] = [mib('MemTotal'), mib('MemAvailable')];
  if (available >= total * MEM_FLOOR) return null;
  return `MemAvailable ${available} MiB is below ${MEM_FLOOR * 100}% of MemTotal ${total} MiB`;
}

/** node, deno: V8 aborts the whole process when its heap is exhausted, and the run takes about
    twice the heap that starting the units took, so the start stops at a quarter of the limit.
    Bun's JavaScriptCore has no such limit (its v8.getHeapStatistics reports one of its own). */
function heapShortage() {
  if (HOST === 'bun') return null;
  const { used_heap_size: used, heap_size_limit: limit } = v8.getHeapStatistics();
  const mib = (b) => Math.round(b / 1048576);
  if (used <= limit / 4) return null;
  return `the JS heap holds ${mib(used)} MiB, over a quarter of its limit of ${mib(limit)} MiB`;
}

/** node-worker: V8 aborts the whole process when it cannot map memory. A Worker maps about 35
    regions by the time it is parked and about 45 while it runs, so the start stops before the
    workers' maps would pass half of vm.max_map_count (the plan's max_map_count). Counting
    /proc/self/maps takes milliseconds at that size: it is counted again only once half of the room
    found is used. */
function mapBudget(limit) {
  if (typeof limit !== 'number') return () => null; // unknown: nothing to check against
  const countMaps = () => fs.readFileSync('/proc/self/maps', 'latin1').split('\n').length - 1;
  const before = countMaps(); // before unit 1
  let nextCheck = 2;
  return (u) => {
    if (u < nextCheck) return null;
    const inUse = countMaps();
    const perWorker = Math.max(48, (inUse - before) / (u - 1)); // workers still starting map more
    const room = Math.floor((limit / 2 - inUse) / perWorker) - START_WINDOW;
    nextCheck = u + Math.ceil(room / 2);
    return room > 0 ? null : `${inUse} memory maps in use, about ${Math.round(perWorker)} per worker, and ` +
      `vm.max_map_count is ${limit} (V8 aborts the process when it cannot map memory; the run needs the other half)`;
  };
}

/** node-worker: why unit u may not start, a thread beyond the plan's room_threads, or null (unit 1
    always starts; no check when the room is unknown). A Worker is one OS thread: /proc/self/status
    "Threads:" grows by exactly one per Worker, also while Workers start (V8's platform threads are
    the process's). The room was measured before this worker existed, so its own threads (main,
    V8's platform and Node's, the writer: 8 with Node v20.20.2) are counted here, before unit 1. */
function threadRoom({ runtime, roomThreads: room, roomThreadsWhy: why }) {
  if (typeof room !== 'number') return () => null;
  const own = Number(/^Threads:\s+(\d+)/m.exec(fs.readFileSync('/proc/self/status', 'latin1'))[1]);
  const cap = Math.max(0, room - own);
  return (u) => (u > Math.max(cap, 1) ? `${runtime} stops at ${cap} units, the machine's room: the plan leaves ` +
    `room for ${room} threads, of which ${own} are the worker's own; ${why}` : null);
}

function formatNs(ns) { // ns >= 1
  const [unit, size] = [['s', 1e9], ['ms', 1e6], ['us', 1e3], ['ns', 1]].find(([, n]) => ns >= BigInt(n));
  return `${Number(ns) / size} ${unit}`;
}

/** The reason not to start unit u > 1 (the protocol's "Starting units"), or null. */
function startBlocker(env, u, shortage) {
  const started = `${u - 1} unit${u === 2 ? '' : 's'}`;
  if (Atomics.load(env.ctl, STOP)) return `stdin was closed (stop requested) after ${started} had started`;
  const limit = env.plan.startLimit;
  if (now() - env.readAt >= limit) return `start limit of ${formatNs(limit)} reached after ${started}`;
  const why = shortage();
  return why && `${why} after ${started}; unit ${u} was not started`;
}

/** node: each unit writes its ring and parks on the gate promise; the loop is synchronous, so
    every unit is parked when it ends. */
function startOnEventLoop(env) {
  let open;
  const gate = new Promise((resolve) => (open = resolve));
  const runs = [];
  let startError = null;
  // Reading /proc/meminfo for each of 100,000 units would cost seconds: every 1024 units.
  const shortage = (u) => () => (u % NODE_CHECK_EVERY === 0 ? memoryShortage() || heapShortage() : null);
  for (let u = 1; u <= env.plan.units; u++) {
    if (u > 1 && (startError = startBlocker(env, u, shortage(u)))) break;
    prepareRing(env, u);
    runs.push(gate.then(() => runUnit(u, env)));
  }
  Promise.all(runs).catch((err) => die(1, `a unit failed: ${err.message}`, err.stack)); // none is expected to
  return { units: runs.length, startError, open };
}

/** node-worker: one Worker per unit, START_WINDOW starting at a time, each parked in Atomics.wait
    on GO. A Worker that fails before it is parked ends the start; one that fails later, the run. */
async function startWorkers(env, shared) {
  const workers = [];
  const parked = []; // per Worker: resolves with null once parked, or with why it could not be
  const starting = new Set();
  let failing = false;
  let startError = null;
  const mapShortage = mapBudget(env.plan.maxMapCount);
  const beyondRoom = threadRoom(env.plan);
  // A thread refused within the room: other processes took some since it was measured.
  const refusedNote = typeof env.plan.roomThreads === 'number'
    ? ` (the machine's room as this worker started: ${env.plan.roomThreadsWhy})` : '';
  for (let u = 1; u <= env.plan.units && !failing; u++) {
    // The clock and memory are checked when a start can really begin, after waiting for a slot.
    while (starting.size >= START_WINDOW) await Promise.race(starting);
    if (u > 1 && (startError = beyondRoom(u) || startBlocker(env, u, () => memoryShortage() || mapShortage(u)))) break;
    let worker;
    try {
      worker = new Worker(__filename, { workerData: { ...shared, role: 'unit', unit: u } });
    } catch (err) { // ERR_WORKER_INIT_FAILED "EAGAIN" when the OS refuses the thread
      startError = `cannot start the worker thread of unit ${u}: ${err.code ? `${err.code}: ` : ''}${err.message}${refusedNote}`;
      break;
    }
    const ready = new Promise((resolve) => {
      let isParked = false;
      const failed = (why) => {
        if (isParked) die(1, `the worker thread of unit ${u} ${why}`);
        resolve(why);
      };
      worker.on('message', () => {
        isParked = true;
        resolve(null);
      });
      worker.on('error', (err) => failed(`failed: ${err.code ? `${err.code}: ` : ''}${err.message}`));
      worker.on('exit', (code) => code !== 0 && failed(`exited (code ${code})`));
    });
    workers.push(worker);
    parked.push(ready);
    starting.add(ready);
    ready.then((why) => {
      starting.delete(ready);
      if (why !== null) failing = true;
    });
  }
  // Units are 1..n without a gap: the first that failed ends them, and the later ones are stopped.
  const reasons = await Promise.all(parked);
  const first = reasons.findIndex((why) => why !== null);
  if (first >= 0) {
    startError = `cannot start the worker thread of unit ${first + 1}: it ${reasons[first]}`;
    for (const worker of workers.splice(first)) worker.removeAllListeners().terminate();
  }
  if (workers.length === 0) throw new Error(startError);
  const open = () => {
    Atomics.store(env.ctl, GO, 1n);
    Atomics.notify(env.ctl, GO);
  };
  return { units: workers.length, startError, open };
}

/** In a node-worker unit: nice (low class), write the ring, park at the gate, run. An exception
    before it is parked is a failed start (the main thread's 'error' event). */
async function unitMain({ raw, unit: u, lowNice, ctl, sab }) {
  const plan = setup(raw);
  if (lowNice !== null && (u - 1) % 2 === 1) applyNice(u, lowNice);
  const cell = new Int32Array(new SharedArrayBuffer(4)); // never notified: every wait times out
  const env = {
    plan, ctl: new BigInt64Array(ctl), ...views(sab, plan),
    sleepFor: (ns) => waitSleep(cell, ns),
    sleepUntil: (deadline) => waitSleep(cell, deadline - now()),
    recipe: recipeOf(raw),
  };
  prepareRing(env, u);
  parentPort.postMessage('ready');
  Atomics.wait(env.ctl, GO, 0n);
  await runUnit(u, env);
}

// ---------- the granularity experiment ----------

/* The granularity experiment (protocol: "The granularity experiment"). A task is a microtask on
   the event loop (node: a resolved promise's then), or one message to a pool of worker_threads,
   one per CPU, answered with the result (node-worker). The coordinator is this main thread:
   it starts the tasks, awaits them and checks every result. */
function granularity(raw, ctl, readAt) {
  const cores = onLoop(raw.runtime) ? 1 : os.availableParallelism();
  const t = { iters: 1n, expected: 0n, started: 0, completed: 0, wrong: 0 };
  const check = (result) => { if (result !== t.expected) t.wrong++; };
  const work = () => { const result = busy(t.iters); t.completed++; return result; };
  const pool = onLoop(raw.runtime) ? null : taskPool(cores);
  const start = pool
    ? () => { t.started++; return pool.task(t.iters).then((result) => { t.completed++; return result; }); }
    : () => { t.started++; return Promise.resolve().then(work); };
  const startAndAwait = async (n) => {
    const tasks = [];
    for (let i = 0; i < n; i++) tasks.push(start());
    for (const task of tasks) check(await task);
  };
  // Each chain's next task starts when the previous one's result arrives, with that result.
  const chain = async () => {
    let result = await start();
    for (let k = 1; k < raw.steps; k++) {
      check(result);
      result = await start();
    }
    check(result);
  };
  const round = {
    trivial: () => startAndAwait(raw.width * raw.steps),
    stencil: async () => { for (let s = 0; s < raw.steps; s++) await startAndAwait(raw.width); },
    chain: () => Promise.all(Array.from({ length: raw.width }, chain)),
  }[raw.pattern];
  // Microtasks never let the event loop read stdin: a turn of it every 10 ms sees a stop.
  let turned = now();
  const stopped = async () => {
    if (now() - turned >= 10000000n) {
      await immediate();
      turned = now();
    }
    return Atomics.load(ctl, STOP) !== 0n;
  };
  // node-worker: the serial work is timed in a pool Worker, where the tasks run.
  const timeSerial = async (calibrate) => {
    const [calls, ns, wrong] = pool ? await pool.serial(t.iters, calibrate) : serial(t.iters, calibrate);
    t.wrong += wrong;
    return [calls, ns];
  };
  const measure = async () => {
    const calibrate = BigInt(raw.calibrate_ns);
    const perIter = compiledRate(calibrate);
    if (pool) await pool.warm(); // each Worker compiles busy() as the main thread just did
    for (const grain of raw.grains_ns.split(',').map(Number)) {
      t.iters = BigInt(Math.max(Math.round(grain / perIter), 1));
      t.expected = busy(t.iters);
      const [calls, serialNs] = await timeSerial(calibrate);
      const warmStart = now();
      do {
        await round();
        if (await stopped()) return true;
      } while (now() - warmStart < BigInt(raw.warmup_ns));
      const [started, completed, wrong] = [t.started, t.completed, t.wrong];
      const measureStart = now();
      let rounds = 0;
      let wall = 0n;
      while (wall < BigInt(raw.duration_ns)) {
        await round();
        rounds++;
        wall = now() - measureStart;
        if (await stopped()) return true;
      }
      const counts = { tasks: t.started - started, completed: t.completed - completed, wrong: t.wrong - wrong };
      // The task alone again, after its rounds: one of the two may have been disturbed.
      const [callsAfter, serialAfterNs] = await timeSerial(calibrate);
      writeAll(frame('P', JSON.stringify({
        grain_ns: grain, iters: Number(t.iters), busy_result: String(t.expected), serial_tasks: calls,
        serial_ns: Number(serialNs), serial_after_tasks: callsAfter, serial_after_ns: Number(serialAfterNs), rounds,
        ...counts, wall_ns: Number(wall), cores,
      })));
    }
    return false;
  };
  writeAll(frame('G', `{"create_start_ns":${readAt},"run_start_ns":${now()},"units":1}`));
  gateOpen = true;
  return measure().then((interrupted) => {
    writeAll(frame('D', `{"interrupted":${interrupted},"busy_result":"0"}`));
    process.exit(0); // ends the pool's Workers too
  });
}

const timedBusy = (n) => { const at = now(); busy(n); return now() - at; };

/* ns per busy iteration of the compiled loop: V8 optimises busy() in the background while it is
   timed (the first rates here were twice too slow), so the shortest of three calls of busy(n),
   for the first n (1024, doubling) whose call takes a quarter of calibrate_ns, is taken again and
   again, for at least 200 ms and until 20 times in a row found nothing 5 % faster (at most 2 s). */
function compiledRate(calibrate) {
  let n = 1024n;
  while (timedBusy(n) < calibrate / 4n) n *= 2n;
  let shortest = null;
  const since = now();
  for (let unchanged = 0; unchanged < 20 || now() - since < 200000000n; unchanged++) {
    const best = [timedBusy(n), timedBusy(n), timedBusy(n)].reduce((a, b) => (a < b ? a : b));
    if (shortest === null || Number(best) < Number(shortest) * 0.95) unchanged = -1;
    if (shortest === null || best < shortest) shortest = best;
    if (now() - since > 2000000000n) break;
  }
  return Number(shortest > 0n ? shortest : 1n) / Number(n);
}

/* The serial work: busy(iters) one call after another, the clock read only between batches (so
   it is not counted as work), until calibrate_ns has passed: [calls, ns, wrong results]. */
function serial(iters, calibrate) {
  const expected = busy(iters);
  const batch = Math.max(Math.floor(10000 / Number(iters)), 1);
  let calls = 0;
  let wrong = 0;
  let took = 0n;
  for (const start = now(); took < calibrate; took = now() - start) {
    for (let i = 0; i < batch; i++) if (busy(iters) !== expected) wrong++;
    calls += batch;
  }
  return [calls, took, wrong];
}

/** node-worker's pool: `size` Workers, a request sent to each in turn, answered by its id. */
function taskPool(size) {
  const waiting = new Map();
  const workers = Array.from({ length: size }, () => {
    const worker = new Worker(__filename, { workerData: { role: 'task' } });
    worker.on('message', ([id, result]) => {
      const resolve = waiting.get(id);
      waiting.delete(id);
      resolve(result);
    });
    worker.on('error', (err) => die(1, `a task Worker failed: ${err.message}`, err.stack));
    return worker;
  });
  let next = 0;
  const ask = (worker, request) => new Promise((resolve) => {
    const id = next++;
    waiting.set(id, resolve);
    workers[worker ?? id % size].postMessage([id, ...request]);
  });
  return {
    task: (iters) => ask(null, ['task', iters]),
    serial: (iters, calibrate) => ask(0, ['serial', iters, calibrate]),
    warm: () => Promise.all(workers.map((_, i) => ask(i, ['warm']))),
  };
}

/** A pool Worker: a task's busy work, the serial work, or compiling busy() first. */
function taskMain() {
  parentPort.on('message', ([id, kind, iters, calibrate]) => {
    if (kind === 'task') parentPort.postMessage([id, busy(iters)]);
    else if (kind === 'serial') parentPort.postMessage([id, serial(iters, calibrate)]);
    else parentPort.postMessage([id, compiledRate(4000000n)]);
  });
}

// ---------- main ----------

let gateOpen = false;

/** A failure: an E frame before G, else (no E may follow G) a line on stderr; exit. */
function die(status, message, detail) {
  if (detail) process.stderr.write(`${detail}\n`);
  try {
    if (gateOpen) fs.writeSync(2, `taskmeter ${HOST} driver: ${message}\n`);
    else writeAll(frame('E', JSON.stringify({ message })));
  } finally {
    process.exit(status);
  }
}

/** Whether fd 3 is the sample file: a regular file open for appending and writing. Started by
    hand, fd 3 may be an unrelated file, or one of Node's own descriptors (its event loop's);
    Node has no fcntl, so the flags are read from /proc/self/fdinfo/3. */
function sampleFileOpen() {
  try {
    const flags = parseInt(/flags:\s*([0-7]+)/.exec(fs.readFileSync('/proc/self/fdinfo/3', 'utf8'))[1], 8);
    const O_APPEND = 0o2000, O_ACCMODE = 0o3;
    return fs.statSync('/proc/self/fd/3').isFile() && (flags & O_APPEND) !== 0 && (flags & O_ACCMODE) !== 0;
  } catch {
    return false;
  }
}

/** Resolves with the plan line and when it was read; end of file on stdin sets STOP. */
function readPlan(ctl) {
  return new Promise((resolve) => {
    const lines = readline.createInterface({ input: process.stdin });
    lines.once('line', (text) => resolve({ text, readAt: now() })); // later lines are ignored
    lines.on('close', () => {
      resolve({ text: '', readAt: now() }); // no plan: not JSON
      Atomics.store(ctl, STOP, 1n);
    });
    process.stdin.on('error', () => lines.close());
  });
}

// The event loop's own delay histogram over the measured window (node, bun, deno: the -worker
// runtimes' units run on other loops). Its timer ticks every 10 ms on the loop it measures, a load the units share.
// Returns the V frame's payload, read when the units have ended.
function watchLoopDelay(startNs, endNs) {
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  const at = (ns) => Math.max(0, Number(ns - now()) / 1e6);
  const enabling = setTimeout(() => histogram.enable(), at(startNs));
  const disabling = setTimeout(() => histogram.disable(), at(endNs));
  return () => {
    clearTimeout(enabling);
    clearTimeout(disabling);
    histogram.disable();
    // Node's histogram holds the intervals between the timer's runs: the delay is what exceeds
    // the 10 ms (as dashboards read it, e.g. fastify's under-pressure). Bun's and Deno's hold
    // the delays themselves (idle here: ~0.1 ms and ~7 us, where Node's intervals are ~10.2 ms).
    const h = histogram;
    const interval = HOST === 'node' ? 10e6 : 0;
    // Bun's histogram gives a percentile as its bucket's upper end, which can pass the maximum.
    const late = (ns) => Math.max(0, Math.round(Math.min(ns, h.max)) - interval);
    const delay = h.count > 0
      ? { count: h.count, mean_ns: late(h.mean), p50_ns: late(h.percentile(50)), p99_ns: late(h.percentile(99)), max_ns: late(h.max) }
      : { count: 0, mean_ns: 0, p50_ns: 0, p99_ns: 0, max_ns: 0 };
    return JSON.stringify({
      source: 'perf_hooks.monitorEventLoopDelay (resolution 10 ms)',
      what: `how late the event loop ran a 10 ms repeating timer of its own${HOST === 'node' ? ': its interval less 10 ms' : ''}`,
      delay,
    });
  };
}

async function main() {
  const ctl = new BigInt64Array(new SharedArrayBuffer(16 * 8));
  const { text, readAt } = await readPlan(ctl);
  let raw;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    return die(2, `the plan is not JSON: ${err.message}`);
  }
  if (raw.protocol !== PROTOCOL) return die(2, `protocol ${JSON.stringify(raw.protocol)}: this worker speaks ${PROTOCOL}`);
  if (!RUNTIMES.includes(raw.runtime)) return die(2, `runtime ${JSON.stringify(raw.runtime)}: not served here`);
  const recipe = recipeOf(raw);
  if (recipe === undefined) return die(2, `runtime ${raw.runtime} has no wait recipe ${JSON.stringify(raw.wait)}`);
  const plan = setup(raw);
  const priority = priorityPlan(plan);
  writeAll(frame('H', JSON.stringify({
    protocol: PROTOCOL, runtime: plan.runtime, runtime_version: `${HOST} ${HOST_VERSION}`, clock: 'CLOCK_MONOTONIC',
    pid: process.pid, priority: priority.text, ...(recipe ? { wait: raw.wait } : {}),
  })));
  if (raw.experiment === 'granularity') return granularity(raw, ctl, readAt);
  if (!sampleFileOpen()) {
    return die(2, 'fd 3, the sample file, is not open for appending (taskmeter opens it for every worker it starts)');
  }

  // Pages are mapped only when a started unit writes its part.
  const sab = new SharedArrayBuffer(plan.units * (CELLS + plan.ring * SAMPLE) * 8);
  // The writer starts (a V8 isolate: ~20 ms of CPU) before the units, not while they run.
  const writer = new Worker(__filename, { workerData: { role: 'writer', raw, ctl: ctl.buffer, sab } });
  writer.on('error', (err) => die(1, `the writer failed: ${err.message}`, err.stack));
  const written = new Promise((resolve) => writer.on('exit', resolve));
  await new Promise((resolve) => writer.once('message', resolve));

  const env = {
    plan, ctl, readAt, ...views(sab, plan),
    sleepFor: timeoutSleep,
    sleepUntil: (deadline) => timeoutSleep(deadline - now()), // no monotonic absolute timer in any host
    recipe,
  };
  const createStart = now();
  const start = onLoop(plan.runtime)
    ? startOnEventLoop(env)
    : await startWorkers(env, { raw, lowNice: priority.lowNice, ctl: ctl.buffer, sab });
  Atomics.store(ctl, STARTED, BigInt(start.units));
  const runStart = now();
  Atomics.store(ctl, END, runStart + plan.warmup + plan.duration);
  const loopDelay = onLoop(plan.runtime) ? watchLoopDelay(runStart + plan.warmup, runStart + plan.warmup + plan.duration) : null;
  start.open();
  // node: the units run once this function awaits, so G is out before their first sample.
  const startError = start.startError ? `,"start_error":${JSON.stringify(start.startError)}` : '';
  writeAll(frame('G', `{"create_start_ns":${createStart},"run_start_ns":${runStart},"units":${start.units}` +
    `${startError}}`));
  gateOpen = true;
  Atomics.store(ctl, WRITE, 1n);
  Atomics.notify(ctl, WRITE);
  const code = await written; // every unit has ended and the writer has sent the rest
  if (code !== 0) die(1, `the writer exited with code ${code}`);

  const { cells } = env;
  const frames = [];
  for (let c = 0, u = 1; u <= start.units; u++, c += CELLS) frames.push(unitEnd(u, cells, c));
  // When no unit got to run a busy phase, the driver computes the result itself.
  const busyResult = ctl[HAS_BUSY] ? BigInt.asUintN(64, ctl[BUSY]) : busy(plan.iters);
  const sum = plan.atomic ? `,"atomic_sum":${ctl[SUM]}` : '';
  if (loopDelay) frames.push(frame('V', loopDelay()));
  frames.push(frame('D', `{"interrupted":${ctl[INTERRUPTED] !== 0n},"busy_result":"${busyResult}"${sum}}`));
  writeAll(Buffer.concat(frames));
  process.exit(0);
}

if (isMainThread) {
  const onFailure = (err) => die(1, err && err.message ? err.message : String(err), err && err.stack);
  process.on('uncaughtException', onFailure);
  process.on('unhandledRejection', onFailure);
  main().catch(onFailure);
} else if (workerData.role === 'task') {
  taskMain();
} else if (workerData.role === 'writer') {
  writerMain(workerData); // an exception reaches the main thread as the Worker's 'error' event
} else {
  unitMain(workerData);
}
