package inference

import "runtime"

// maxSampleHelpers bounds the goroutines that sample a step's rows next to
// the worker.
const maxSampleHelpers = 3

// sampleHelpers is how many helpers an engine of maxSeq sequences starts
// (a variable so tests can force parallelism on a one-core machine).
var sampleHelpers = func(maxSeq int) int {
	return min(runtime.GOMAXPROCS(0)-1, maxSeq-1, maxSampleHelpers)
}
