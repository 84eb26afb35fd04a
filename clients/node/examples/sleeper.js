'use strict';
// sleeper MS: while running(), a task sleeps MS milliseconds then records one unit; the program
// waits for it and loops. `node sleeper.js 100` reports about 9.9 units/s.
const { setTimeout: sleep } = require('timers/promises');
const tm = require('taskmeter-record');

async function unit(ms) {
  await sleep(ms);
  tm.record();
}

async function main() {
  const ms = Number(process.argv[2]);
  if (process.argv.length !== 3 || !(ms >= 0)) {
    console.error('usage: node sleeper.js MS');
    process.exit(2);
  }
  while (tm.running()) await unit(ms);
  await tm.flush();
}

main();
