'use strict';
// flood EVENTS [THREADS]: call record() EVENTS times in all from THREADS worker threads (each its
// own stream) as fast as possible, flush, and print the call rate to stderr.
const { Worker, isMainThread, workerData, parentPort } = require('worker_threads');
const { setImmediate: turn } = require('timers/promises');
const tm = require('taskmeter-record');

async function calls(n) {
  for (let i = 0; i < n; i++) {
    tm.record();
    // One event-loop turn per batch lets the socket drain; a loop that never yields would only
    // fill the bounded queue and drop the rest.
    if (i % 2048 === 2047) await turn();
  }
  await tm.flush();
}

async function main() {
  const [events, threads = 1] = process.argv.slice(2).map(Number);
  if (!(Number.isSafeInteger(events) && events >= 0 && Number.isSafeInteger(threads) && threads >= 1)) {
    console.error('usage: node flood.js EVENTS [THREADS]');
    process.exit(2);
  }
  const t0 = process.hrtime.bigint();
  if (threads === 1) {
    await calls(events);
  } else {
    const share = Math.floor(events / threads);
    await Promise.all(Array.from({ length: threads }, (_, i) => new Promise((resolve, reject) => {
      const w = new Worker(__filename, { workerData: share + (i < events % threads ? 1 : 0) });
      w.on('error', reject);
      w.on('exit', resolve); // a worker's final batch goes before it exits
    })));
  }
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  console.error(`flood: ${events} events in ${s.toFixed(3)} s = ${Math.round(events / s)} events/s`);
}

if (isMainThread) main();
else calls(workerData);
