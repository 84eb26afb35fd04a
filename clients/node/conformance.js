'use strict';
// The contract of clients/README.md: 10 units, 2 latencies, 1 unknown id, 1 duplicate,
// 1 never completed. Sends nothing without TASKMETER_RECORD_STREAM.
const tm = require('taskmeter-record');

async function main() {
  tm.record();
  tm.record();
  tm.record();
  tm.recordN(5);
  tm.start(1);
  tm.start(2);
  tm.complete(2);
  tm.complete(1);
  tm.complete(99); // never started
  tm.complete(1); // completed twice
  tm.start(3); // never completed
  await tm.flush(); // the final (empty) batch goes when the event loop empties
}

main();
