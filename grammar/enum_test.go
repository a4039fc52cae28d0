package grammar

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hexserve/hexserve/internal/costtest"
)

// bigEnum is {"enum": [n distinct strings]} (n = 80,000: 960 KB).
func bigEnum(n int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{"color":{"enum":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"value-%03d"`, i)
	}
	b.WriteString(`]}}}`)
	return b.String()
}

// TestLongEnum: an enum of 80,000 strings is refused at the compile budget
// with an Error naming it, in about 0.15 s (decoding the 960 KB document
// takes a third of it; the CPU figure includes the GC's), not the seconds
// of a duplicate check that grows with the square of the values; one of
// 1,000 (and their duplicates) compiles.
func TestLongEnum(t *testing.T) {
	schema := bigEnum(80_000)
	var err error
	cost := costtest.Measure(func() { _, err = Compile([]byte(schema), Options{}) })
	var e *Error
	if !errors.As(err, &e) || e.Path != "properties.color.enum" || !strings.Contains(e.Message, "costs too much") {
		t.Fatalf("Compile = %v, want an Error at properties.color.enum", err)
	}
	t.Logf("refused in %v wall, %v CPU: %v", cost.Wall, cost.CPU, err)
	// 1 s of CPU, not the 0.15 s it takes alone: at load 10 it took 339 ms
	// (shared caches, the GC's share); the quadratic check took seconds.
	costtest.Within(t, "80,000-string enum", cost, time.Second, allocBound)
	dup := strings.Replace(bigEnum(1000), `]}}}`, `,"value-001","value-002"]}}}`, 1)
	g, err := Compile([]byte(dup), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(g.root.props[0].n.lits); n != 1000 {
		t.Errorf("%d values, want 1000 (duplicates dropped)", n)
	}
}

// TestMaxCompiles: with one compile at a time, a second waits for the
// first, and one that cannot start within CompileWait gets ErrBusy.
func TestMaxCompiles(t *testing.T) {
	c := NewCache(0)
	c.LimitCompiles(1)
	done, err := c.enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = Compile([]byte(`{"type":"string"}`), Options{Cache: c})
	if !errors.Is(err, ErrBusy) || time.Since(start) < CompileWait {
		t.Fatalf("Compile while another runs = %v after %v, want ErrBusy after %v", err, time.Since(start), CompileWait)
	}
	if _, err = Tools([]Tool{{Name: "f"}}, false, Options{Cache: c}); !errors.Is(err, ErrBusy) {
		t.Fatalf("Tools = %v, want ErrBusy", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := Compile([]byte(`{"type":"string"}`), Options{Cache: c}); err != nil {
			t.Errorf("a compile that waits its turn: %v", err)
		}
	})
	time.Sleep(50 * time.Millisecond)
	done()
	wg.Wait()
}

// TestLongRequired: a required list of 60,000 names (a body limit's
// worth), alone or merged across allOf parts (once a pairwise check that
// took the square of the names, uncharged), is refused within the bound of
// every hostile schema.
func TestLongRequired(t *testing.T) {
	var b strings.Builder
	for i := range 60_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d"`, i)
	}
	req := b.String()
	other := strings.ReplaceAll(req, `"p`, `"q`) // no name in common: each looked up in all the others
	for name, schema := range map[string]string{
		"required":       `{"type":"object","required":[` + req + `]}`,
		"allOf required": `{"allOf":[{"required":[` + req + `]},{"required":[` + other + `]}]}`,
	} {
		var err error
		cost := costtest.Measure(func() { _, err = Compile([]byte(schema), Options{}) })
		t.Logf("%s: %v", name, err)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: Compile = %v, want an Error", name, err)
		}
		costtest.Within(t, name, cost, cpuBound, allocBound)
	}
}
