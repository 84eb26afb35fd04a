# The contract of clients/README.md: 10 units, 2 latencies, 1 unknown id, 1 duplicate,
# 1 never completed. Sends nothing without TASKMETER_RECORD.
TaskMeter.record()
TaskMeter.record()
TaskMeter.record()
TaskMeter.record_n(5)
TaskMeter.start(1)
TaskMeter.start(2)
TaskMeter.complete(2)
TaskMeter.complete(1)
# never started
TaskMeter.complete(99)
# completed twice
TaskMeter.complete(1)
# never completed
TaskMeter.start(3)
TaskMeter.flush()
