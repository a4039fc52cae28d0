package graphio

import (
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/internal/threadcpu"
)

// Lifecycle is the graph-call lifecycle both runners share, around their
// own graphs and cache:
//
//   - Check, before an evaluation: a closed runner fails with ErrClosed, and
//     graphs lost in a failed reload are reloaded first (or the call fails);
//   - Execute: one graph call, timed into Stats under the graph's key (wall
//     time; with ThreadCPU also the thread's CPU time);
//   - on a failed call, the one rule for the cache: it is invalid, so
//     Invalidate resets the runner's valid rows to 0 and the next call
//     evaluates from row 0, whatever valid its caller passes; the error is
//     an ExecError; a device restart (QNN 1007/1011) also reloads
//     the contexts and calls (the failed call still fails), and a reload
//     that fails leaves the runner broken until a later Check reloads;
//   - Close, once.
//
// A Lifecycle is not safe for concurrent use (nor are the runners).
type Lifecycle struct {
	Prefix     string // the runner's package name, which starts its errors and logs
	ErrClosed  error  // returned by Check after Close
	Log        zerolog.Logger
	Stats      *plan.Stats
	Reload     func() error // recreates the contexts and calls; the buffers stay
	Invalidate func()       // resets the runner's valid cache rows to 0
	// ThreadCPU reads the calling thread's CPU clock around each call
	// (GraphStats.CPU, for bench's host figures). Off, CPU stays 0: the
	// clock has no vDSO, so its two readings are two system calls per call
	// that nothing else reads.
	ThreadCPU bool

	closed bool
	broken error // why the last reload after a device restart failed
}

// Check fails after Close, and reloads the graphs a failed reload left
// unavailable.
func (l *Lifecycle) Check() error {
	if l.closed {
		return l.ErrClosed
	}
	if l.broken != nil {
		if err := l.Reload(); err != nil {
			return fmt.Errorf("%s: the graphs are unavailable since a device restart: %w", l.Prefix, err)
		}
		l.broken = nil
		l.Stats.Reloads++
	}
	return nil
}

// Executor is one pre-bound graph call (*qnn.Call).
type Executor interface {
	Execute() error
}

// Execute runs call, recording it under key. A failure is an ExecError
// naming graph and where it lives (in, asked only then), handled by the
// rule above.
func (l *Lifecycle) Execute(key string, call Executor, graph string, in func() string) error {
	var c0, c1 time.Duration
	if l.ThreadCPU {
		c0, _ = threadcpu.Time()
	}
	t0 := time.Now()
	err := call.Execute()
	d := time.Since(t0)
	if l.ThreadCPU {
		c1, _ = threadcpu.Time()
	}
	l.Stats.Observe(key, d, c1-c0, err != nil)
	if err == nil {
		return nil
	}
	err = &ExecError{Runner: l.Prefix, Graph: graph, In: in(), Err: err}
	l.Invalidate()
	if qnn.IsDeviceRestart(err) {
		l.Log.Warn().Err(err).Msg(l.Prefix + ": device restart, reloading the context binaries")
		if rerr := l.Reload(); rerr != nil {
			l.broken = rerr
			return errors.Join(err, fmt.Errorf("%s: reloading after a device restart: %w", l.Prefix, rerr))
		}
		l.Stats.Reloads++
	}
	return err
}

// Close marks the runner closed and reports whether it was open: the
// runner releases its resources only then.
func (l *Lifecycle) Close() bool {
	if l.closed {
		return false
	}
	l.closed = true
	return true
}

// Closed reports whether Close was called.
func (l *Lifecycle) Closed() bool { return l.closed }

// ExecError is a failed graph execution: the runner (its package name),
// the graph, and where the graph lives (its file, part or context).
type ExecError struct {
	Runner, Graph, In string
	Err               error
}

func (e *ExecError) Error() string {
	return fmt.Sprintf("%s: executing graph %q of %s: %v", e.Runner, e.Graph, e.In, e.Err)
}

func (e *ExecError) Unwrap() error { return e.Err }
