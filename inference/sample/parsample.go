package sample

import (
	"sync"
	"sync/atomic"
)

// Job is one row to sample: the sequence's sampler, the row's logits (valid
// until Run returns) and what to report. Run sets Tok and LP.
type Job struct {
	S      *Sampler
	L      Logits
	WantLP bool
	Top    int

	Tok int32
	LP  *Logprob
}

// batch is one Run's jobs, taken in turn by the caller and the helpers.
// Each job touches only its own sampler (and random stream), and a Scratch
// carries nothing from one step to the next, so a sequence's tokens do not
// depend on which goroutine samples it.
type batch struct {
	jobs []Job
	next atomic.Int32
	wg   sync.WaitGroup
}

func (b *batch) work(sc *Scratch) {
	for {
		i := int(b.next.Add(1)) - 1
		if i >= len(b.jobs) {
			return
		}
		j := &b.jobs[i]
		j.Tok, j.LP = j.S.Sample(sc, j.L, j.WantLP, j.Top)
	}
}

// Workers samples rows: the calling goroutine with its Scratch, and for a
// step's rows up to n helper goroutines besides it, each with its own,
// started on first use. Sampling memory is thus one Scratch per goroutine
// (≈ 7 MiB at V = 128,256 once every path has run), whatever the number of
// sequences. Its methods are for one goroutine.
type Workers struct {
	n       int
	own     Scratch
	ch      chan *batch
	running sync.WaitGroup
	batch   batch
}

// NewWorkers returns workers with up to helpers goroutines besides the caller.
func NewWorkers(helpers int) *Workers { return &Workers{n: max(helpers, 0)} }

// Scratch is the caller's work space, for the rows it samples itself.
func (w *Workers) Scratch() *Scratch { return &w.own }

// Run samples jobs on the caller and up to n helpers.
func (w *Workers) Run(jobs []Job) {
	b := &w.batch
	b.jobs = jobs
	b.next.Store(0)
	h := min(w.n, len(jobs)-1)
	if h > 0 && w.ch == nil {
		w.ch = make(chan *batch)
		for range w.n {
			w.running.Add(1)
			go func() {
				defer w.running.Done()
				var sc Scratch
				for b := range w.ch {
					b.work(&sc)
					b.wg.Done()
				}
			}()
		}
	}
	b.wg.Add(max(h, 0))
	for range h {
		w.ch <- b
	}
	b.work(&w.own)
	b.wg.Wait()
	b.jobs = nil
}

// Stop ends the helpers and waits for them; a later Run starts them again.
func (w *Workers) Stop() {
	if w.ch != nil {
		close(w.ch)
		w.running.Wait()
		w.ch = nil
	}
}
