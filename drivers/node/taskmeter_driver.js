'use strict';
/* taskmeter Node.js driver, runtime ids "node" and "node-worker".
 * Implements worker protocol v2 (protocol/README.md): the plan as one JSON line on stdin, NDJSON
 * on stdout.
 *   node         one async function (a promise chain) per unit on the one event loop;
 *                sleeps with setTimeout, yields with setImmediate.
 *   node-worker  one worker_threads Worker per unit (this same file), running the loop
 *                synchronously; sleeps with Atomics.wait, yields with setImmediate.
 * Node.js 16 or newer, built-in modules only, Linux (/proc). Run: node taskmeter_driver.js */

const fs = require('fs');
const os = require('os');
const v8 = require('v8');
const { isMainThread, parentPort, workerData, Worker } = require('worker_threads');
const { setTimeout: delay, setImmediate: immediate } = require('timers/promises');

const RUNTIMES = ['node', 'node-worker'];
const MAX_PLAN = 1 << 20; // bytes in the plan line
const MAX_DEPTH = 64; // JSON nesting; bounds the parser's recursion
const U64_MAX = (1n << 64n) - 1n;
const I64_MAX = (1n << 63n) - 1n;
const MAX_TIMEOUT_MS = 2147483647; // setTimeout turns anything longer into 1 ms
const COLUMNS = ['expected_ns', 'start_ns', 'busy_end_ns', 'intended_ns', 'wake_ns', 'missed'];
const MISSED = COLUMNS.indexOf('missed');
const SAMPLE_BUDGET = 1n << 22n; // samples reserved before the gate, all units together (protocol: "Storage")
const START_WINDOW = 4; // node-worker: Workers starting at once (each takes tens of ms of CPU)
const MEM_FLOOR = 0.2; // start no unit once MemAvailable is below this share of MemTotal
const NODE_CHECK_EVERY = 1024n; // node: units started between two memory checks
const STOP = 0; // indices in the control Int32Array shared with the workers
const GO = 1;

/** CLOCK_MONOTONIC in nanoseconds (uv_hrtime), as a BigInt. */
const now = () => process.hrtime.bigint();

/** A plan the worker refuses: error line, exit status 2. */
class PlanError extends Error {}

const refuse = (message) => {
  throw new PlanError(message);
};

// ---------- JSON ----------
// JSON.parse cannot be used: it keeps the last of two equal keys, reads 1.0 and 1e3 as integers
// and rounds integers above 2^53. This parser keeps integers exactly (BigInt) and marks numbers
// written with a fraction or an exponent, and objects with a repeated key.

const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;
const ESCAPES = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

class JsonParser {
  constructor(text) {
    this.s = text;
    this.i = 0;
    this.depth = 0;
  }

  fail(what) {
    refuse(`the plan is not valid JSON: ${what} at character ${this.i}`);
  }

  skipWs() {
    const s = this.s;
    while (this.i < s.length) {
      const c = s.charCodeAt(this.i);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
      this.i++;
    }
  }

  document() {
    const v = this.value();
    this.skipWs();
    if (this.i !== this.s.length) this.fail('unexpected data after the plan');
    return v;
  }

  value() {
    this.skipWs();
    if (this.i >= this.s.length) this.fail('unexpected end of input');
    const c = this.s[this.i];
    if (c === '{') return this.object();
    if (c === '[') return this.array();
    if (c === '"') return { kind: 'string', value: this.string() };
    if (c === '-' || (c >= '0' && c <= '9')) return this.number();
    for (const [word, v] of [['true', true], ['false', false], ['null', null]]) {
      if (this.s.startsWith(word, this.i)) {
        this.i += word.length;
        return v === null ? { kind: 'null' } : { kind: 'boolean', value: v };
      }
    }
    return this.fail('tfn'.includes(c) ? 'invalid literal' : 'unexpected character');
  }

  enter() {
    if (++this.depth > MAX_DEPTH) this.fail('nesting too deep');
    this.i++;
    this.skipWs();
  }

  object() {
    const members = new Map();
    const repeated = new Set();
    this.enter();
    if (this.s[this.i] === '}') {
      this.i++;
      this.depth--;
      return { kind: 'object', members, repeated };
    }
    for (;;) {
      this.skipWs();
      if (this.s[this.i] !== '"') this.fail('expected a member name');
      const key = this.string();
      this.skipWs();
      if (this.s[this.i] !== ':') this.fail("expected ':'");
      this.i++;
      if (members.has(key)) repeated.add(key);
      members.set(key, this.value());
      this.skipWs();
      const c = this.s[this.i++];
      if (c === '}') break;
      if (c !== ',') {
        this.i--;
        this.fail("expected ',' or '}'");
      }
    }
    this.depth--;
    return { kind: 'object', members, repeated };
  }

  array() {
    const items = [];
    this.enter();
    if (this.s[this.i] === ']') {
      this.i++;
      this.depth--;
      return { kind: 'array', items };
    }
    for (;;) {
      items.push(this.value());
      this.skipWs();
      const c = this.s[this.i++];
      if (c === ']') break;
      if (c !== ',') {
        this.i--;
        this.fail("expected ',' or ']'");
      }
    }
    this.depth--;
    return { kind: 'array', items };
  }

  hex4(at) {
    const h = this.s.slice(at, at + 4);
    return /^[0-9a-fA-F]{4}$/.test(h) ? parseInt(h, 16) : -1;
  }

  /** At the opening quote; returns the decoded string. */
  string() {
    const s = this.s;
    let out = '';
    let from = ++this.i;
    for (;;) {
      if (this.i >= s.length) this.fail('unterminated string');
      const c = s.charCodeAt(this.i);
      if (c === 0x22) break;
      if (c < 0x20) this.fail('control character in string');
      if (c !== 0x5c) {
        this.i++;
        continue;
      }
      out += s.slice(from, this.i);
      const e = s[this.i + 1];
      if (e !== undefined && e in ESCAPES) {
        out += ESCAPES[e];
        this.i += 2;
      } else if (e === 'u') {
        let cp = this.hex4(this.i + 2);
        if (cp < 0) this.fail('invalid \\u escape');
        if (cp >= 0xdc00 && cp <= 0xdfff) this.fail('lone low surrogate');
        if (cp >= 0xd800 && cp <= 0xdbff) {
          const lo = s.startsWith('\\u', this.i + 6) ? this.hex4(this.i + 8) : -1;
          if (lo < 0xdc00 || lo > 0xdfff) this.fail('lone high surrogate');
          cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          this.i += 6;
        }
        out += String.fromCodePoint(cp);
        this.i += 6;
      } else {
        this.fail('invalid escape');
      }
      from = this.i;
    }
    out += s.slice(from, this.i);
    this.i++; // closing quote
    return out;
  }

  number() {
    NUMBER.lastIndex = this.i;
    const m = NUMBER.exec(this.s);
    if (!m) this.fail('invalid number');
    this.i = NUMBER.lastIndex;
    const integer = m[1] === undefined && m[2] === undefined;
    return { kind: 'number', text: m[0], integer, value: integer ? BigInt(m[0]) : null };
  }
}

// ---------- plan ----------

const clip = (text, n) => (text.length > n ? `${text.slice(0, n)}...` : text);

function member(obj, path, name) {
  if (obj.repeated.has(name)) refuse(`duplicate field ${path}${name}`);
  if (!obj.members.has(name)) refuse(`missing field ${path}${name}`);
  return obj.members.get(name);
}

function typed(obj, path, name, kind, what) {
  const v = member(obj, path, name);
  if (v.kind !== kind) refuse(`${path}${name} must be ${what}`);
  return v;
}

const getString = (obj, path, name) => typed(obj, path, name, 'string', 'a string').value;

function getUint(obj, path, name, min) {
  const v = typed(obj, path, name, 'number', 'an integer');
  if (!v.integer) refuse(`${path}${name} must be an integer (got ${clip(v.text, 40)})`);
  if (v.value < min) refuse(`${path}${name} must be >= ${min}`);
  if (v.value > U64_MAX) refuse(`${path}${name} is out of range`);
  return v.value;
}

/** The validated plan; every integer is a BigInt. Throws PlanError. */
function loadPlan(line) {
  let text;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(line);
  } catch {
    refuse('the plan is not valid JSON: invalid UTF-8');
  }
  const root = new JsonParser(text).document();
  if (root.kind !== 'object') refuse('the plan must be a JSON object');

  const protocol = typed(root, '', 'protocol', 'number', 'an integer');
  if (!protocol.integer || protocol.value !== 2n)
    refuse(`unsupported protocol version ${clip(protocol.text, 40)} (this worker speaks 2)`);
  const experiment = getString(root, '', 'experiment');
  if (experiment !== 'sleep' && experiment !== 'atomic-sum')
    refuse(`unknown experiment "${clip(experiment, 64)}" (this worker runs "sleep" and "atomic-sum")`);
  const runtime = getString(root, '', 'runtime');
  if (!RUNTIMES.includes(runtime))
    refuse(`runtime "${clip(runtime, 64)}" is not served by this driver (${RUNTIMES.join(', ')})`);

  const plan = { runtime, atomic: experiment === 'atomic-sum' };
  plan.units = getUint(root, '', 'units', 1n);
  plan.classes = getUint(root, '', 'priority_classes', 1n);
  if (plan.classes > 2n) refuse(`priority_classes must be 1 or 2 (got ${plan.classes})`);
  plan.startLimit = getUint(root, '', 'start_limit_ns', 1n);
  plan.duration = getUint(root, '', 'duration_ns', 1n);
  plan.warmup = getUint(root, '', 'warmup_ns', 0n);
  const sleep = typed(root, '', 'sleep', 'object', 'an object');
  const mode = getString(sleep, 'sleep.', 'mode');
  if (mode !== 'relative' && mode !== 'absolute') refuse(`unknown sleep mode "${clip(mode, 64)}"`);
  plan.absolute = mode === 'absolute';
  const schedule = typed(sleep, 'sleep.', 'schedule', 'object', 'an object');
  plan.kind = getString(schedule, 'sleep.schedule.', 'kind');
  if (!['fixed', 'by-unit', 'modulo', 'none'].includes(plan.kind))
    refuse(`unknown schedule kind "${clip(plan.kind, 64)}"`);
  plan.sleeps = plan.kind !== 'none';
  plan.m = plan.kind === 'modulo' ? getUint(schedule, 'sleep.schedule.', 'm', 1n) : 1n;
  plan.ns = plan.sleeps ? getUint(schedule, 'sleep.schedule.', 'ns', 0n) : 0n;
  const busy = typed(root, '', 'busy', 'object', 'an object');
  plan.iters = getUint(busy, 'busy.', 'iters', 0n);
  plan.yield = typed(busy, 'busy.', 'yield', 'boolean', 'true or false').value;

  // Keep every deadline below 2^64: timestamps (uptime) are far below 2^63 ns, so a run length
  // and a longest period below 2^63 cannot overflow end, intended or next.
  if (plan.duration > I64_MAX || plan.warmup > I64_MAX - plan.duration)
    refuse('warmup_ns + duration_ns must be below 2^63');
  const longest = (plan.kind === 'by-unit' ? plan.units : plan.m) * plan.ns;
  if (longest > I64_MAX) refuse('the longest sleep of the schedule must be below 2^63 ns');
  // With a zero period the absolute deadline never moves and the missed-period rule never ends.
  if (plan.sleeps && plan.absolute && plan.ns === 0n)
    refuse('sleep.schedule.ns must be >= 1 in absolute mode (a zero period never advances)');
  // Any number of units is accepted: the start stops where a limit is reached (startBlocker).
  return plan;
}

const classOf = (plan, u) => Number((u - 1n) % plan.classes);

// ---------- measurement ----------

/** The schedule's sleep for unit u (1-based) in period k (0-based); BigInt nanoseconds. */
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

/* Samples unit `id` reserves before the gate, the same in every worker (protocol: "Storage"): what
   the schedule can take (an iteration lasts at least its sleep, counted as at least 1 us; a modulo
   cycle of m periods sleeps m(m+1)/2 x ns) plus 16, within an equal share of SAMPLE_BUDGET, and
   at least 16. BigInt, so every step is exact. */
function reserve(plan, id) {
  if (!plan.sleeps) return 0; // the schedule none records no samples
  const total = plan.warmup + plan.duration;
  const ns = plan.ns > 1000n ? plan.ns : 1000n;
  let estimate;
  if (plan.kind === 'modulo') estimate = (total * plan.m) / ((ns * plan.m * (plan.m + 1n)) / 2n) + plan.m;
  else {
    const e = expected(plan, id, 0n);
    estimate = total / (e > 1000n ? e : 1000n);
  }
  estimate += 16n;
  const share = SAMPLE_BUDGET / plan.units;
  const capped = estimate < share ? estimate : share;
  return Number(capped > 16n ? capped : 16n);
}

/** One unit, its counts and its samples. The samples are kept in memory until the run is over,
    in one BigUint64Array of COLUMNS.length columns of `cap` entries each. */
class Unit {
  constructor(plan, id) {
    this.id = id; // BigInt
    this.origin = 0n;
    this.n = 0; // iterations (and samples, unless the schedule is none)
    this.measured = 0; // iterations that started at or after measure_start
    this.interrupted = false;
    this.busyResult = null;
    this.grown = 0; // times the arrays outgrew their reserve
    this.cap = reserve(plan, id);
    // Every byte written now: a fresh typed array maps zero pages, faulted in on first write.
    this.data = new BigUint64Array(COLUMNS.length * this.cap).fill(U64_MAX);
  }

  record(e, t0, t1, intended, t2, m) {
    let { data, cap } = this;
    if (this.n === cap) { // past the reserve: double it, and count it
      this.grown++;
      const grown = new BigUint64Array(COLUMNS.length * cap * 2);
      for (let c = 0; c < COLUMNS.length; c++) grown.set(data.subarray(c * cap, (c + 1) * cap), c * cap * 2);
      this.data = data = grown;
      this.cap = cap *= 2;
    }
    const i = this.n;
    data[i] = e;
    data[cap + i] = t0;
    data[2 * cap + i] = t1;
    data[3 * cap + i] = intended;
    data[4 * cap + i] = t2;
    data[5 * cap + i] = m;
  }
}

/* The work loop of the protocol README, line for line. `hold` (node) is a promise the unit waits
   for before its origin. The context supplies `end`, `measureStart`, the stop flag, the counter of
   atomic-sum (`count`, null in the sleep experiment) and the two sleeps; a sleep returns a promise
   (node) or nothing (it has already slept, node-worker). */
async function runUnit(unit, ctx, hold) {
  if (hold) await hold;
  const { plan, end, measureStart, count } = ctx;
  const u = unit.id;
  const origin = (unit.origin = now());
  let k = 0n;
  let next = plan.sleeps ? origin + expected(plan, u, 0n) : 0n;
  for (;;) {
    const t0 = now();
    if (t0 >= end) break;
    if (ctx.stopRequested()) {
      unit.interrupted = true;
      break;
    }
    let t1 = t0;
    if (plan.iters > 0n) {
      unit.busyResult = plan.yield ? await busyYielding(plan.iters) : busy(plan.iters);
      t1 = now();
    }
    let e;
    let intended;
    let t2;
    let m = 0n;
    if (!plan.sleeps) {
      await immediate(); // the same yield as busy.yield's
    } else {
      e = expected(plan, u, k);
      let pending;
      if (plan.absolute) {
        intended = next;
        pending = ctx.sleepUntil(next);
      } else {
        intended = t1 + e;
        pending = ctx.sleepFor(e);
      }
      if (pending) await pending;
      t2 = now();
      k++;
      if (plan.absolute) { // skipped periods are stored with the sample that overran
        next += expected(plan, u, k);
        if (t2 > next) {
          // The rule below steps once per skipped period, and a saturated event loop (100,000
          // units) overruns by hundreds. Whole cycles of the schedule (m periods of modulo, one
          // otherwise) sum to the same wherever they start, so those are taken at once.
          const steps = plan.kind === 'modulo' ? plan.m : 1n;
          const cycle = plan.kind === 'modulo' ? (plan.ns * plan.m * (plan.m + 1n)) / 2n : expected(plan, u, 0n);
          const cycles = (t2 - next) / cycle;
          m = cycles * steps;
          k += m;
          next += cycles * cycle;
        }
        while (t2 > next) {
          m++;
          k++;
          next += expected(plan, u, k);
        }
      }
    }
    if (count) count();
    if (plan.sleeps) unit.record(e, t0, t1, intended, t2, m);
    unit.n++;
    if (t0 >= measureStart) unit.measured++;
  }
}

// node: setTimeout takes whole milliseconds; the delay is rounded up (a delay below 1 ms is 1 ms).
async function timeoutSleep(ns) {
  let ms = (ns + 999999n) / 1000000n;
  do {
    const step = ms > BigInt(MAX_TIMEOUT_MS) ? MAX_TIMEOUT_MS : Number(ms);
    await delay(step);
    ms -= BigInt(step);
  } while (ms > 0n);
}

/* node-worker: Atomics.wait takes fractional milliseconds. V8 truncates them to whole
   microseconds, adds them to its own clock (CLOCK_MONOTONIC truncated to the microsecond, so up
   to 999 ns behind ours) and returns once that clock reaches the sum: a wait of exactly
   ceil(ns / 1 us) could end up to 999 ns early (seen: 1 us asked, 0.21 us slept). So the wait is
   ns + 999 rounded up to whole microseconds; the extra half microsecond only keeps the double
   from falling below that whole number (V8 truncates it away). */
function waitSleep(cell, ns) {
  const ms = ns <= 0n ? 0 : (Number((ns + 999n + 999n) / 1000n) + 0.5) / 1000;
  Atomics.wait(cell, 0, 0, ms);
}

// ---------- starting units ----------

const plural = (n, word) => `${n} ${word}${n === 1n ? '' : 's'}`;

function formatNs(ns) {
  for (const [unit, size] of [['s', 1e9], ['ms', 1e6], ['us', 1e3]]) {
    if (ns >= BigInt(size)) return `${Number(ns) / size} ${unit}`;
  }
  return `${ns} ns`;
}

/** Why no more units may be started, or null: MemAvailable below MEM_FLOOR of MemTotal. */
function memoryShortage() {
  let text;
  try {
    text = fs.readFileSync('/proc/meminfo', 'latin1');
  } catch {
    return null; // nothing to check against
  }
  const kib = (name) => Number((new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text) || [])[1]);
  const total = kib('MemTotal');
  const available = kib('MemAvailable');
  if (!(available < total * MEM_FLOOR)) return null;
  const mib = (k) => Math.round(k / 1024);
  return `MemAvailable ${mib(available)} MiB is below ${MEM_FLOOR * 100}% of MemTotal ${mib(total)} MiB`;
}

/** node-worker: V8 aborts the whole process when it cannot map memory. A Worker maps about 35
    regions by the time it is parked (its thread's stack, its isolate's heap) and about 45 while
    it runs, so the start stops before the workers' maps would pass half of vm.max_map_count.
    Counting /proc/self/maps takes milliseconds at that size: it is counted again only once half
    of the room found is used. Returns the check for startBlocker. */
function mapBudget() {
  const countMaps = () => fs.readFileSync('/proc/self/maps', 'latin1').split('\n').length - 1;
  let limit;
  try {
    limit = Number(fs.readFileSync('/proc/sys/vm/max_map_count', 'latin1'));
  } catch {
    return () => null; // nothing to check against
  }
  const before = countMaps(); // before unit 1
  let nextCheck = 2n;
  return (u) => {
    if (u < nextCheck) return null;
    const inUse = countMaps();
    // Workers still starting have not mapped everything yet, hence the floor of 48.
    const perWorker = Math.max(48, (inUse - before) / Number(u - 1n));
    const room = Math.floor((limit / 2 - inUse) / perWorker) - START_WINDOW;
    if (room <= 0) {
      return `${inUse} memory maps in use, about ${Math.round(perWorker)} per worker, and vm.max_map_count is ` +
        `${limit} (V8 aborts the process when it cannot map memory; the run needs the other half)`;
    }
    nextCheck = u + BigInt(Math.ceil(room / 2));
    return null;
  };
}

/** node: V8 aborts the whole process when its heap is exhausted. The run and the output take
    about twice the heap that starting the units took (1 KB a unit), so stop at a quarter. */
function heapShortage() {
  const { used_heap_size: used, heap_size_limit: limit } = v8.getHeapStatistics();
  const mib = (b) => Math.round(b / 1048576);
  return used > limit / 4 ? `the JS heap holds ${mib(used)} MiB, over a quarter of its limit of ${mib(limit)} MiB` : null;
}

/** The reason not to start unit u > 1 (the protocol's "Starting units"), or null. */
function startBlocker(plan, readAt, u, stopped, shortage) {
  const started = plural(u - 1n, 'unit');
  if (stopped) return `stdin was closed (stop requested) after ${started} had started`;
  if (now() - readAt >= plan.startLimit) return `start limit of ${formatNs(plan.startLimit)} reached after ${started}`;
  const why = shortage && shortage();
  return why ? `${why} after ${started}; unit ${u} was not started` : null;
}

/** Fields of /proc/thread-self/stat of the calling thread (field 1 its tid, 19 its nice value,
    40 its real-time priority, 41 its policy). The name (field 2) may hold spaces and ')'. */
function threadStat() {
  const text = fs.readFileSync('/proc/thread-self/stat', 'latin1');
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' '); // fields 3, 4, ...
  const field = (n) => Number(fields[n - 3]);
  return { tid: Number.parseInt(text, 10), nice: field(19), rtPriority: field(40), policy: field(41) };
}

const POLICIES = ['SCHED_OTHER', 'SCHED_FIFO', 'SCHED_RR', 'SCHED_BATCH', 'SCHED_ISO', 'SCHED_IDLE', 'SCHED_DEADLINE'];

/** hello.priority, and the nice value of the low class (null: nothing is applied). */
function priorityPlan(plan) {
  if (plan.classes === 1n) return { text: 'none', lowNice: null };
  if (plan.runtime === 'node')
    return { text: 'none: the units are promise chains on one event loop, which has no priorities', lowNice: null };
  const self = threadStat(); // the main thread, whose nice value and policy the workers inherit
  const policy = POLICIES[self.policy] || `policy ${self.policy}`;
  if (self.policy === 1 || self.policy === 2) {
    return {
      text: `none: the threads run under ${policy} priority ${self.rtPriority}, and Node has no API for ` +
        'real-time priorities, so both classes keep it',
      lowNice: null,
    };
  }
  const low = Math.min(19, self.nice + 10);
  return {
    text: `nice: high ${self.nice}, low ${low} under ${policy} (os.setPriority on each low-class worker's ` +
      'thread id, read back from /proc/thread-self/stat)',
    lowNice: low,
  };
}

/** Inside a low-class Worker: nice its own thread (PRIO_PROCESS with a tid is that thread only),
    then check that the kernel has it. */
function applyNice(u, low) {
  const { tid } = threadStat();
  os.setPriority(tid, low);
  const got = threadStat().nice;
  if (got !== low) throw new Error(`unit ${u}: os.setPriority(${tid}, ${low}) left the thread's nice value at ${got}`);
}

// ---------- output ----------

function writeOut(text) {
  return new Promise((resolve, reject) => {
    process.stdout.write(text, (err) => (err ? reject(err) : resolve()));
  });
}

let failing = false;

/** The error line, then exit: 2 for a refused plan, 1 for a failure. */
function fail(status, message, detail) {
  if (failing) return;
  failing = true;
  if (detail) process.stderr.write(`${detail}\n`);
  const line = `${JSON.stringify({ type: 'error', message: message || 'unknown error' })}\n`;
  process.stdout.write(line, () => process.exit(status));
  setTimeout(() => process.exit(status), 5000).unref(); // stdout gone: exit all the same
}

const CHUNK = 1 << 16; // samples joined at a time
const FLUSH_AT = 1 << 20; // characters per write

/** Collects output text and writes it in large pieces, waiting for each write to finish. */
class Output {
  constructor() {
    this.parts = [];
    this.size = 0;
  }

  put(text) {
    this.parts.push(text);
    this.size += text.length;
  }

  /** Writes once enough has been collected (or `always`). */
  async flush(always) {
    if (!always && this.size < FLUSH_AT) return;
    const text = this.parts.join('');
    this.parts = [];
    this.size = 0;
    await writeOut(text);
  }
}

async function writeResults(plan, run) {
  const out = new Output();
  let samples = 0;
  let missed = 0n;
  let grown = 0;
  for (const unit of run.units) {
    const { data, cap } = unit;
    const n = plan.sleeps ? unit.n : 0; // samples
    out.put(`{"type":"unit","unit":${unit.id},"class":${classOf(plan, unit.id)},"origin_ns":${unit.origin}` +
      `,"iterations":${unit.n},"measured_iterations":${unit.measured}`);
    for (let c = 0; c < COLUMNS.length; c++) {
      out.put(`,"${COLUMNS[c]}":[`);
      for (let i = 0; i < n; i += CHUNK) {
        // a BigUint64Array joins as exact decimal integers
        out.put((i ? ',' : '') + data.subarray(c * cap + i, c * cap + Math.min(n, i + CHUNK)).join(','));
        await out.flush();
      }
      out.put(']');
    }
    out.put('}\n');
    await out.flush();
    samples += n;
    grown += unit.grown;
    for (let i = 0; i < n; i++) missed += data[MISSED * cap + i];
  }
  const ran = run.units.find((unit) => unit.busyResult !== null);
  const result = ran ? ran.busyResult : busy(plan.iters); // no unit got to run its busy phase
  const measureStart = run.runStart + plan.warmup;
  const interrupted = run.units.some((unit) => unit.interrupted);
  out.put(
    `{"type":"done","create_start_ns":${run.createStart},"run_start_ns":${run.runStart}` +
      `,"measure_start_ns":${measureStart},"end_ns":${run.end}` +
      `,"units":${run.units.length},"samples":${samples},"missed":${missed},"storage_grown":${grown}` +
      `,"interrupted":${interrupted},"busy_result":"${result}"` +
      (run.startError ? `,"start_error":${JSON.stringify(run.startError)}` : '') +
      (plan.atomic ? `,"atomic_sum":${run.atomicSum}` : '') +
      '}\n',
  );
  await out.flush(true);
}

// ---------- stdin ----------

/** Reads the plan line (and the time it was read), then keeps reading: end of file (or an error)
    means stop early. */
function watchStdin() {
  const chunks = [];
  let size = 0;
  let planDone = false;
  let eof = false;
  const onEof = [];
  let resolvePlan;
  let rejectPlan;
  const plan = new Promise((resolve, reject) => {
    resolvePlan = resolve;
    rejectPlan = reject;
  });
  const takePlan = (last) => {
    planDone = true;
    if (last) chunks.push(last);
    if (size + (last ? last.length : 0) > MAX_PLAN) rejectPlan(new PlanError(`the plan line is longer than ${MAX_PLAN} bytes`));
    else resolvePlan({ line: Buffer.concat(chunks), readAt: now() });
  };
  process.stdin.on('data', (chunk) => {
    if (planDone) return; // anything after the plan line is ignored
    const nl = chunk.indexOf(0x0a);
    if (nl >= 0) return takePlan(chunk.subarray(0, nl));
    chunks.push(chunk);
    size += chunk.length;
    if (size > MAX_PLAN) takePlan(null);
  });
  const ended = () => {
    if (eof) return;
    eof = true;
    if (!planDone) takePlan(null); // a plan without its '\n'
    for (const f of onEof) f();
  };
  process.stdin.on('end', ended);
  process.stdin.on('error', ended);
  process.stdin.on('close', ended);
  return {
    plan,
    whenEof(f) {
      if (eof) f();
      else onEof.push(f);
    },
  };
}

// ---------- runtimes ----------

/** node: every unit is an async function on this thread's event loop. A unit is started (its
    samples allocated, its function called) before run_start and waits for the `go` promise. */
async function runOnEventLoop(plan, stdin, readAt) {
  let stop = false;
  stdin.whenEof(() => {
    stop = true;
  });
  let counter = 0; // atomic-sum: one thread, so a plain number is atomic
  let release;
  const go = new Promise((resolve) => {
    release = resolve;
  });
  const ctx = {
    plan,
    stopRequested: () => stop,
    count: plan.atomic ? () => { counter++; } : null,
    sleepFor: timeoutSleep,
    sleepUntil: (deadline) => {
      const left = deadline - now();
      return timeoutSleep(left > 0n ? left : 0n);
    },
  };
  const units = [];
  const runs = [];
  let startError = null;
  // The loop is synchronous, so reading /proc/meminfo for every unit would cost seconds.
  const shortage = (u) => (u % NODE_CHECK_EVERY === 0n ? memoryShortage() || heapShortage() : null);
  const createStart = now();
  // Each unit reserves its storage (new Unit) and parks at `go` (runUnit runs up to its first
  // await), so when this loop ends every unit created is parked.
  for (let u = 1n; u <= plan.units; u++) {
    if (u > 1n && (startError = startBlocker(plan, readAt, u, stop, () => shortage(u)))) break;
    let unit;
    try {
      unit = new Unit(plan, u);
    } catch (err) { // RangeError: Array buffer allocation failed
      if (u === 1n) throw err;
      startError = `cannot allocate the samples of unit ${u}: ${err.message}`;
      break;
    }
    units.push(unit);
    runs.push(runUnit(unit, ctx, go));
  }
  const runStart = now();
  ctx.measureStart = runStart + plan.warmup;
  ctx.end = ctx.measureStart + plan.duration;
  release();
  await Promise.all(runs);
  return { createStart, runStart, end: ctx.end, units, startError, atomicSum: counter };
}

/** node-worker: starts the Worker of unit u. `ready` resolves once the worker holds at the start
    signal, or failed to get there (then `startFailure` says why); `result` is its report. */
function startWorker(u, shared) {
  const w = { unit: u, startFailure: null, dropped: false };
  let phase = 'starting';
  let onReady;
  let settle;
  w.ready = new Promise((resolve) => {
    onReady = resolve;
  });
  w.result = new Promise((resolve, reject) => {
    settle = { resolve, reject };
  });
  w.result.catch(() => {}); // awaited only after the start; a failure before then is not "unhandled"
  const failed = (why) => {
    if (w.dropped) return;
    if (phase === 'starting') {
      phase = 'failed';
      w.startFailure = why;
      onReady();
    } else if (phase === 'ready') {
      settle.reject(new Error(`the worker thread of unit ${u} ${why}`));
    }
  };
  w.worker = new Worker(__filename, { workerData: { ...shared, unit: u } }); // may throw
  w.worker.on('message', (msg) => {
    if (msg.type !== 'ready') settle.resolve(msg);
    else if (phase === 'starting') {
      phase = 'ready';
      onReady();
    }
  });
  w.worker.on('error', (err) => failed(`failed: ${err.code ? `${err.code}: ` : ''}${err.message}`));
  w.worker.on('exit', (code) => failed(`exited (code ${code}) ${phase === 'ready' ? 'without its samples' : 'before it was ready'}`));
  w.drop = () => {
    w.dropped = true;
    w.worker.terminate().catch(() => {});
  };
  return w;
}

/** node-worker: one Worker per unit, started (and its sample arrays allocated) before run_start,
    START_WINDOW at a time, then released together through a shared GO flag. */
async function runOnWorkers(plan, stdin, readAt, lowNice) {
  const control = new Int32Array(new SharedArrayBuffer(8));
  const endCell = new BigInt64Array(new SharedArrayBuffer(8));
  const counter = new BigInt64Array(new SharedArrayBuffer(8)); // atomic-sum, shared by all workers
  let stop = false;
  stdin.whenEof(() => {
    stop = true;
    Atomics.store(control, STOP, 1);
  });
  const shared = { plan, lowNice, control: control.buffer, endCell: endCell.buffer, counter: counter.buffer };
  const workers = [];
  const starting = new Set();
  let startError = null;
  const mapShortage = mapBudget();
  const createStart = now();
  for (let u = 1n; u <= plan.units; u++) {
    // The clock and memory are checked when a start can really begin, after waiting for a slot.
    while (starting.size >= START_WINDOW) await Promise.race(starting);
    if (workers.some((w) => w.startFailure)) break;
    const shortage = () => memoryShortage() || mapShortage(u);
    if (u > 1n && (startError = startBlocker(plan, readAt, u, stop, shortage))) break;
    let w;
    try {
      w = startWorker(u, shared);
    } catch (err) { // ERR_WORKER_INIT_FAILED "EAGAIN" when the OS refuses the thread
      const why = `cannot start the worker thread of unit ${u}: ${err.code ? `${err.code}: ` : ''}${err.message}`;
      if (u === 1n) throw new Error(why);
      startError = why;
      break;
    }
    workers.push(w);
    starting.add(w.ready);
    w.ready.then(() => starting.delete(w.ready));
  }
  await Promise.all(workers.map((w) => w.ready));
  // Units are 1..n without a gap: the first that failed to start ends them, and the workers
  // started after it (up to START_WINDOW - 1) are stopped.
  const first = workers.findIndex((w) => w.startFailure);
  if (first === 0) throw new Error(`cannot start the worker thread of unit 1: it ${workers[0].startFailure}`);
  if (first > 0) {
    startError = `cannot start the worker thread of unit ${first + 1}: it ${workers[first].startFailure}`;
    for (const w of workers.splice(first)) w.drop();
  }

  const runStart = now();
  const end = runStart + plan.warmup + plan.duration;
  Atomics.store(endCell, 0, end);
  Atomics.store(control, GO, 1);
  Atomics.notify(control, GO);

  const reports = await Promise.all(workers.map((w) => w.result));
  const units = reports.map((msg, i) => ({ ...msg, id: workers[i].unit }));
  return { createStart, runStart, end, units, startError, atomicSum: Atomics.load(counter, 0) };
}

/** Inside a Worker: one unit, sleeping with Atomics.wait. An exception before 'ready' is a
    failed start (the main thread's 'error' event). */
async function workerMain() {
  const { plan, unit: id, lowNice, control: controlBuffer, endCell: endBuffer, counter: counterBuffer } = workerData;
  if (lowNice !== null && classOf(plan, id) === 1) applyNice(id, lowNice);
  const control = new Int32Array(controlBuffer);
  const counter = new BigInt64Array(counterBuffer);
  const unit = new Unit(plan, id);
  const cell = new Int32Array(new SharedArrayBuffer(4)); // never notified: every wait times out
  parentPort.postMessage({ type: 'ready' });
  Atomics.wait(control, GO, 0);
  const end = BigInt.asUintN(64, Atomics.load(new BigInt64Array(endBuffer), 0));
  const ctx = {
    plan,
    end,
    measureStart: end - plan.duration,
    stopRequested: () => Atomics.load(control, STOP) !== 0,
    count: plan.atomic ? () => Atomics.add(counter, 0, 1n) : null, // sequentially consistent
    sleepFor: (ns) => waitSleep(cell, ns),
    sleepUntil: (deadline) => waitSleep(cell, deadline - now()),
  };
  await runUnit(unit, ctx);
  const { origin, n, measured, interrupted, busyResult, data, cap, grown } = unit;
  parentPort.postMessage({ type: 'result', origin, n, measured, interrupted, busyResult, data, cap, grown }, [data.buffer]);
}

async function main() {
  process.stdout.on('error', (err) => {
    process.stderr.write(`taskmeter node driver: cannot write the results: ${err.message}\n`);
    process.exit(1);
  });
  const stdin = watchStdin();
  const { line, readAt } = await stdin.plan;
  const plan = loadPlan(line);
  const priority = priorityPlan(plan);
  const hello = {
    type: 'hello', protocol: 2, runtime: plan.runtime, runtime_version: `node ${process.version}`,
    clock: 'CLOCK_MONOTONIC', pid: process.pid, priority: priority.text,
  };
  await writeOut(`${JSON.stringify(hello)}\n`);
  const run = plan.runtime === 'node'
    ? await runOnEventLoop(plan, stdin, readAt)
    : await runOnWorkers(plan, stdin, readAt, priority.lowNice);
  await writeResults(plan, run);
  process.exit(0);
}

function onFailure(err) {
  if (err instanceof PlanError) fail(2, err.message);
  else fail(1, err && err.message ? err.message : String(err), err && err.stack);
}

if (isMainThread) {
  process.on('uncaughtException', onFailure);
  process.on('unhandledRejection', onFailure);
  main().catch(onFailure);
} else {
  workerMain(); // an exception reaches the main thread as the Worker's 'error' event
}
