package graphio

import (
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/hexagon/qnn"
)

type fakeCall struct{ err error }

func (c *fakeCall) Execute() error { return c.err }

// TestLifecycle drives the shared lifecycle with a fake call: every
// failure invalidates the cache and comes back as an ExecError; a device restart
// also reloads; a failed reload leaves the runner broken until Check
// reloads; Close happens once.
func TestLifecycle(t *testing.T) {
	errClosed := errors.New("closed")
	var stats plan.Stats
	valid, reloads, reloadErr := 7, 0, error(nil)
	l := &Lifecycle{Prefix: "test", ErrClosed: errClosed, Log: zerolog.Nop(), Stats: &stats,
		Reload:     func() error { reloads++; return reloadErr },
		Invalidate: func() { valid = 0 }}
	call := &fakeCall{}
	for _, tc := range []struct {
		name      string
		err       error
		reloadErr error
		reloads   int
		valid     int
	}{
		{"success", nil, nil, 0, 7},
		{"graph error", &qnn.Error{Code: qnn.CodeGraphInvalidTensor}, nil, 0, 0},
		{"device restart", &qnn.Error{Code: qnn.CodeSystemCommunication}, nil, 1, 0},
		{"restart, reload fails", &qnn.Error{Code: qnn.CodeSystemCommunicationFatal}, errors.New("binary gone"), 1, 0},
	} {
		valid, reloads, reloadErr, call.err = 7, 0, tc.reloadErr, tc.err
		err := l.Execute("g", call, "graph", func() string { return "g.bin" })
		var w *ExecError
		switch {
		case tc.err == nil && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != nil && (!errors.As(err, &w) || !errors.Is(err, tc.err) || !strings.HasPrefix(err.Error(), `test: executing graph "graph" of g.bin: `)):
			t.Errorf("%s: error %v is not the call error as an ExecError", tc.name, err)
		case tc.reloadErr != nil && !strings.Contains(err.Error(), "test: reloading after a device restart: binary gone"):
			t.Errorf("%s: error %v does not say the reload failed", tc.name, err)
		}
		if reloads != tc.reloads || valid != tc.valid {
			t.Errorf("%s: %d reloads, valid %d; want %d, %d", tc.name, reloads, valid, tc.reloads, tc.valid)
		}
	}
	if g := stats.Graphs["g"]; g.Calls != 4 || g.Failed != 3 || stats.Reloads != 1 {
		t.Errorf("stats: %+v, %d reloads", g, stats.Reloads)
	}
	// Broken: Check reloads, failing until the reload works.
	if err := l.Check(); err == nil || !strings.Contains(err.Error(), "unavailable since a device restart") {
		t.Errorf("Check while the reload fails: %v", err)
	}
	reloadErr = nil
	if err := l.Check(); err != nil || stats.Reloads != 2 {
		t.Errorf("Check after the reload works: %v, %d reloads", err, stats.Reloads)
	}
	if err := l.Check(); err != nil || stats.Reloads != 2 {
		t.Errorf("Check when healthy: %v, %d reloads", err, stats.Reloads)
	}
	if !l.Close() || l.Close() || !l.Closed() || !errors.Is(l.Check(), errClosed) {
		t.Error("Close is not once, or Check does not fail after it")
	}
}
