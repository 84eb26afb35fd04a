'use strict';
/* taskmeter Node.js driver, runtime ids "node" and "node-worker".
 * Implements worker protocol v1 (protocol/README.md): the plan as one JSON line on stdin, NDJSON
 * on stdout.
 *   node         one async function (a promise chain) per unit on the one event loop;
 *                sleeps with setTimeout, yields with setImmediate.
 *   node-worker  one worker_threads Worker per unit (this same file), running the loop
 *                synchronously; sleeps with Atomics.wait, yields with setImmediate.
 * Node.js 16 or newer, built-in modules only. Run: node taskmeter_driver.js */

const { isMainThread, parentPort, workerData, Worker } = require('worker_threads');
const { setTimeout: delay, setImmediate: immediate } = require('timers/promises');

const RUNTIMES = ['node', 'node-worker'];
const MAX_PLAN = 1 << 20; // bytes in the plan line
const MAX_DEPTH = 64; // JSON nesting; bounds the parser's recursion
const U64_MAX = (1n << 64n) - 1n;
const I64_MAX = (1n << 63n) - 1n;
const MAX_TIMEOUT_MS = 2147483647; // setTimeout turns anything longer into 1 ms
const COLUMNS = ['expected_ns', 'start_ns', 'busy_end_ns', 'intended_ns', 'wake_ns', 'missed'];
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
  if (!protocol.integer || protocol.value !== 1n)
    refuse(`unsupported protocol version ${clip(protocol.text, 40)} (this worker speaks 1)`);
  const experiment = getString(root, '', 'experiment');
  if (experiment !== 'sleep') refuse(`unknown experiment "${clip(experiment, 64)}" (this worker runs "sleep")`);
  const runtime = getString(root, '', 'runtime');
  if (!RUNTIMES.includes(runtime))
    refuse(`runtime "${clip(runtime, 64)}" is not served by this driver (${RUNTIMES.join(', ')})`);

  const plan = { runtime };
  plan.units = getUint(root, '', 'units', 1n);
  plan.duration = getUint(root, '', 'duration_ns', 1n);
  plan.warmup = getUint(root, '', 'warmup_ns', 0n);
  const sleep = typed(root, '', 'sleep', 'object', 'an object');
  const mode = getString(sleep, 'sleep.', 'mode');
  if (mode !== 'relative' && mode !== 'absolute') refuse(`unknown sleep mode "${clip(mode, 64)}"`);
  plan.absolute = mode === 'absolute';
  const schedule = typed(sleep, 'sleep.', 'schedule', 'object', 'an object');
  plan.kind = getString(schedule, 'sleep.schedule.', 'kind');
  if (!['fixed', 'by-unit', 'modulo'].includes(plan.kind)) refuse(`unknown schedule kind "${clip(plan.kind, 64)}"`);
  plan.m = plan.kind === 'modulo' ? getUint(schedule, 'sleep.schedule.', 'm', 1n) : 1n;
  plan.ns = getUint(schedule, 'sleep.schedule.', 'ns', 0n);
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
  if (plan.absolute && plan.ns === 0n)
    refuse('sleep.schedule.ns must be >= 1 in absolute mode (a zero period never advances)');
  // One unit is one array entry (and, for node-worker, one thread).
  if (plan.units > BigInt(Number.MAX_SAFE_INTEGER)) refuse(`units ${plan.units} is out of range for this driver`);
  return plan;
}

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

/** One unit and its samples, kept in memory as columns until the run is over. */
class Unit {
  constructor(plan, id) {
    this.id = id; // BigInt
    this.origin = 0n;
    this.n = 0;
    this.interrupted = false;
    this.busyResult = null;
    // Room for the whole run (capped), touched now so that measuring seldom allocates.
    const units = Number(plan.units);
    let shortest = plan.kind === 'by-unit' ? id * plan.ns : plan.ns;
    if (shortest < 1000n) shortest = 1000n;
    const estimate = (plan.warmup + plan.duration) / shortest + 2n;
    const cap = Math.max(64, Math.min(1 << 16, Math.floor((1 << 22) / units)));
    const capacity = estimate < BigInt(cap) ? Number(estimate) : cap;
    this.columns = COLUMNS.map(() => new BigUint64Array(capacity).fill(U64_MAX));
  }

  record(...values) {
    if (this.n === this.columns[0].length) {
      this.columns = this.columns.map((old) => {
        const grown = new BigUint64Array(old.length * 2);
        grown.set(old);
        return grown;
      });
    }
    for (let c = 0; c < values.length; c++) this.columns[c][this.n] = values[c];
    this.n++;
  }
}

/* The work loop of the protocol README, line for line. The context supplies the clock's deadline
   `end`, the stop flag and the two sleeps; a sleep returns a promise (node) or nothing (it has
   already slept, node-worker). */
async function runUnit(unit, ctx) {
  const { plan, end } = ctx;
  const u = unit.id;
  const origin = (unit.origin = now());
  let k = 0n;
  let next = origin + expected(plan, u, 0n);
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
    const e = expected(plan, u, k);
    let intended;
    let pending;
    if (plan.absolute) {
      intended = next;
      pending = ctx.sleepUntil(next);
    } else {
      intended = t1 + e;
      pending = ctx.sleepFor(e);
    }
    if (pending) await pending;
    const t2 = now();
    k++;
    let m = 0n;
    if (plan.absolute) { // skipped periods are stored with the sample that overran
      next += expected(plan, u, k);
      while (t2 > next) {
        m++;
        k++;
        next += expected(plan, u, k);
      }
    }
    unit.record(e, t0, t1, intended, t2, m);
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

/* node-worker: Atomics.wait takes fractional milliseconds, which V8 truncates to whole
   microseconds (its tick); the time is rounded up to the next microsecond instead. The extra
   half microsecond only keeps the double from falling below it (V8 truncates it away). */
function waitSleep(cell, ns) {
  const ms = ns <= 0n ? 0 : (Number((ns + 999n) / 1000n) + 0.5) / 1000;
  Atomics.wait(cell, 0, 0, ms);
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
    return this.size >= FLUSH_AT ? this.flush() : null;
  }

  flush() {
    const text = this.parts.join('');
    this.parts = [];
    this.size = 0;
    return writeOut(text);
  }
}

async function writeResults(plan, run) {
  const out = new Output();
  let samples = 0;
  let missed = 0n;
  for (const unit of run.units) {
    await out.put(`{"type":"unit","unit":${unit.id},"origin_ns":${unit.origin}`);
    for (let c = 0; c < COLUMNS.length; c++) {
      await out.put(`,"${COLUMNS[c]}":[`);
      for (let i = 0; i < unit.n; i += CHUNK) {
        // a BigUint64Array joins as exact decimal integers
        await out.put((i ? ',' : '') + unit.columns[c].subarray(i, Math.min(unit.n, i + CHUNK)).join(','));
      }
      await out.put(']');
    }
    await out.put('}\n');
    samples += unit.n;
    const m = unit.columns[COLUMNS.indexOf('missed')];
    for (let i = 0; i < unit.n; i++) missed += m[i];
  }
  const ran = run.units.find((unit) => unit.busyResult !== null);
  const result = ran ? ran.busyResult : busy(plan.iters); // no unit got to run its busy phase
  const measureStart = run.runStart + plan.warmup;
  const interrupted = run.units.some((unit) => unit.interrupted);
  out.put(
    `{"type":"done","run_start_ns":${run.runStart},"measure_start_ns":${measureStart},"end_ns":${run.end}` +
      `,"units":${plan.units},"samples":${samples},"missed":${missed}` +
      `,"interrupted":${interrupted},"busy_result":"${result}"}\n`,
  );
  await out.flush();
}

// ---------- stdin ----------

/** Reads the plan line, then keeps reading: end of file (or an error) means stop early. */
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
    else resolvePlan(Buffer.concat(chunks));
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

/** node: every unit is an async function on this thread's event loop. */
async function runOnEventLoop(plan, stdin) {
  let stop = false;
  stdin.whenEof(() => {
    stop = true;
  });
  const units = [];
  for (let u = 1n; u <= plan.units; u++) units.push(new Unit(plan, u));
  const runStart = now();
  const end = runStart + plan.warmup + plan.duration;
  const ctx = {
    plan,
    end,
    stopRequested: () => stop,
    sleepFor: timeoutSleep,
    sleepUntil: (deadline) => {
      const left = deadline - now();
      return timeoutSleep(left > 0n ? left : 0n);
    },
  };
  await Promise.all(units.map((unit) => runUnit(unit, ctx)));
  return { runStart, end, units };
}

/** node-worker: one Worker per unit, started (and its sample arrays allocated) before run_start,
    then released together through a shared GO flag. */
async function runOnWorkers(plan, stdin) {
  const control = new Int32Array(new SharedArrayBuffer(8));
  const endCell = new BigInt64Array(new SharedArrayBuffer(8));
  stdin.whenEof(() => Atomics.store(control, STOP, 1));
  const workers = [];
  for (let u = 1n; u <= plan.units; u++) {
    let worker;
    try {
      worker = new Worker(__filename, { workerData: { plan, unit: u, control: control.buffer, endCell: endCell.buffer } });
    } catch (err) {
      throw new Error(`cannot start the worker thread of unit ${u}: ${err.message}`);
    }
    const state = { worker, unit: u };
    state.ready = new Promise((resolve) => {
      state.onReady = resolve;
    });
    state.result = new Promise((resolve, reject) => {
      worker.on('message', (msg) => (msg.type === 'ready' ? state.onReady() : resolve(msg)));
      worker.on('error', (err) => reject(new Error(`the worker thread of unit ${u} failed: ${err.message}`)));
      worker.on('exit', (code) => reject(new Error(`the worker thread of unit ${u} exited (code ${code}) without its samples`)));
    });
    workers.push(state);
  }
  // A worker that fails before it is ready (or after) makes the run fail.
  const failure = new Promise((_, reject) => workers.forEach((w) => w.result.catch(reject)));
  await Promise.race([Promise.all(workers.map((w) => w.ready)), failure]);

  const runStart = now();
  const end = runStart + plan.warmup + plan.duration;
  Atomics.store(endCell, 0, end);
  Atomics.store(control, GO, 1);
  Atomics.notify(control, GO);

  const units = [];
  for (const w of workers) {
    const msg = await w.result;
    const { origin, n, interrupted, busyResult, columns } = msg;
    units.push({ id: w.unit, origin, n, interrupted, busyResult, columns });
  }
  return { runStart, end, units };
}

/** Inside a Worker: one unit, sleeping with Atomics.wait. */
async function workerMain() {
  const { plan, unit: id, control: controlBuffer, endCell: endBuffer } = workerData;
  const control = new Int32Array(controlBuffer);
  const unit = new Unit(plan, id);
  const cell = new Int32Array(new SharedArrayBuffer(4)); // never notified: every wait times out
  parentPort.postMessage({ type: 'ready' });
  Atomics.wait(control, GO, 0);
  const ctx = {
    plan,
    end: BigInt.asUintN(64, Atomics.load(new BigInt64Array(endBuffer), 0)),
    stopRequested: () => Atomics.load(control, STOP) !== 0,
    sleepFor: (ns) => waitSleep(cell, ns),
    sleepUntil: (deadline) => waitSleep(cell, deadline - now()),
  };
  await runUnit(unit, ctx);
  const { origin, n, interrupted, busyResult, columns } = unit;
  parentPort.postMessage(
    { type: 'result', origin, n, interrupted, busyResult, columns },
    columns.map((column) => column.buffer),
  );
}

async function main() {
  process.stdout.on('error', (err) => {
    process.stderr.write(`taskmeter node driver: cannot write the results: ${err.message}\n`);
    process.exit(1);
  });
  const stdin = watchStdin();
  const plan = loadPlan(await stdin.plan);
  const hello = {
    type: 'hello', protocol: 1, runtime: plan.runtime, runtime_version: `node ${process.version}`,
    clock: 'CLOCK_MONOTONIC', pid: process.pid,
  };
  await writeOut(`${JSON.stringify(hello)}\n`);
  const run = plan.runtime === 'node' ? await runOnEventLoop(plan, stdin) : await runOnWorkers(plan, stdin);
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
