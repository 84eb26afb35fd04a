// Command conformance sends exactly the events of the contract in clients/README.md.
package main

import taskmeter "taskmeter/clients/go"

func main() {
	taskmeter.Record()
	taskmeter.Record()
	taskmeter.Record()
	taskmeter.RecordN(5)
	taskmeter.Start(1)
	taskmeter.Start(2)
	taskmeter.Complete(2)
	taskmeter.Complete(1)
	taskmeter.Complete(99) // never started
	taskmeter.Complete(1)  // completed twice
	taskmeter.Start(3)     // never completed
	taskmeter.Flush()
}
