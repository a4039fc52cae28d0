package inference

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// maxSampleHelpers bounds the goroutines that sample a step's rows next to
// the worker.
const maxSampleHelpers = 3

// sampleHelpers is how many helpers an engine of maxSeq sequences starts
// (a variable so tests can force parallelism on a one-core machine).
var sampleHelpers = func(maxSeq int) int {
	return min(runtime.GOMAXPROCS(0)-1, maxSeq-1, maxSampleHelpers)
}

// sampleJob is one row to sample: a decoding sequence without a draft or a
// constraint, and its logits (held until the next call on the model).
type sampleJob struct {
	s   *seq
	l   Logits
	tok int32
	lp  *Logprob
}

// sampleBatch is one step's jobs, taken in turn by the worker and the
// helpers. Each job touches only its own sequence's sampler (and RNG), so
// a sequence's tokens do not depend on which goroutine samples it.
type sampleBatch struct {
	jobs []sampleJob
	next atomic.Int32
	wg   sync.WaitGroup
}

func (b *sampleBatch) work() {
	for {
		i := int(b.next.Add(1)) - 1
		if i >= len(b.jobs) {
			return
		}
		j := &b.jobs[i]
		j.tok, j.lp = j.s.smp.sample(j.l, j.s.g.wantLP, j.s.g.top)
	}
}

// sampleWorkers is the engine's small, fixed set of sampling helpers, started
// on first use and stopped when the worker exits.
type sampleWorkers struct {
	n       int
	ch      chan *sampleBatch
	running sync.WaitGroup
	batch   sampleBatch
}

// run samples jobs, on up to n helpers besides the caller.
func (w *sampleWorkers) run(jobs []sampleJob) {
	b := &w.batch
	b.jobs = jobs
	b.next.Store(0)
	h := min(w.n, len(jobs)-1)
	if h > 0 && w.ch == nil {
		w.ch = make(chan *sampleBatch)
		for range w.n {
			w.running.Add(1)
			go func() {
				defer w.running.Done()
				for b := range w.ch {
					b.work()
					b.wg.Done()
				}
			}()
		}
	}
	b.wg.Add(max(h, 0))
	for range h {
		w.ch <- b
	}
	b.work()
	b.wg.Wait()
	b.jobs = nil
}

// stop ends the helpers and waits for them.
func (w *sampleWorkers) stop() {
	if w.ch != nil {
		close(w.ch)
		w.running.Wait()
		w.ch = nil
	}
}
