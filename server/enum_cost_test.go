package server_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hexserve/hexserve/internal/costtest"
	"github.com/hexserve/hexserve/server"
)

// enumOf is a JSON array of n distinct strings (80,000: 960 KB).
func enumOf(n int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"value-%03d"`, i)
	}
	b.WriteByte(']')
	return b.String()
}

// TestLongEnumRequests (issue #39 finding 2): an 80,000-string enum in a
// response_format, an Ollama format or a forced tool's parameters is a 400
// naming the enum, answered at the compile budget (≈0.1 s of CPU; the
// bound here, on the process's CPU, leaves room for the client's encoding),
// not after seconds.
func TestLongEnumRequests(t *testing.T) {
	r := newRig(t, rigOptions{opts: server.Options{BodyLimit: 4 << 20}})
	if rep := r.do(t, "POST", "/v1/chat/completions", schemaBody(`{"type":"string"}`)); rep.Status != 200 {
		t.Fatalf("warm-up: %d %s", rep.Status, rep.Body) // the vocabulary index, built once
	}
	enum := enumOf(80_000)
	tool := `[{"name":"f","input_schema":{"type":"object","properties":{"c":{"enum":` + enum + `}}}}]`
	forced := `{"model":"` + modelID + `","max_tokens":8,"messages":[{"role":"user","content":"Hi"}],"tools":` + tool +
		`,"tool_choice":{"type":"tool","name":"f"}}`
	cases := []struct{ name, path, body, want string }{
		{"response_format", "/v1/chat/completions", schemaBody(`{"enum":` + enum + `}`), "response_format.json_schema.schema.enum"},
		{"ollama format", "/api/chat", `{"model":"` + modelID + `","messages":[{"role":"user","content":"Hi"}],"format":{"enum":` + enum + `}}`, "format.enum"},
		// The tool's definition is rendered into the prompt: the cheap
		// check (the prompt's length) answers before any compile.
		{"forced tool", "/v1/messages", forced, "prompt is too long"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var rep reply
			cost := costtest.Measure(func() { rep = r.do(t, "POST", tc.path, tc.body) })
			t.Logf("%d in %v wall, %v CPU (the process's, the client's encoding included): %.120s", rep.Status, cost.Wall, cost.CPU, rep.Body)
			if rep.Status != 400 || !strings.Contains(string(rep.Body), tc.want) {
				t.Errorf("got %d %.300s, want a 400 naming %s", rep.Status, rep.Body, tc.want)
			}
			// CPU, not wall time: a loaded machine stretches the wall
			// clock, while the old quadratic check took 13.8 CPU-s.
			costtest.Within(t, tc.name, cost, time.Second, 512<<20)
		})
	}
	r.assertHealthy(t)
	// With a window the tool fits in, the compile refuses the enum.
	wide := newRig(t, rigOptions{opts: server.Options{BodyLimit: 4 << 20}, model: func(m *server.Model) { m.ContextLen = 1 << 17 }})
	var rep reply
	cost := costtest.Measure(func() { rep = wide.do(t, "POST", "/v1/messages", forced) })
	t.Logf("forced tool, wide window: %d in %v wall, %v CPU: %.120s", rep.Status, cost.Wall, cost.CPU, rep.Body)
	if rep.Status != 400 || !strings.Contains(string(rep.Body), "properties.c.enum") {
		t.Errorf("got %d %.300s, want a 400 naming tools[0].input_schema.properties.c.enum", rep.Status, rep.Body)
	}
}

// TestCompilesAtOnce: with structured.max_compiles 1, a burst of costly
// schemas runs one compile at a time; each is answered (a 400 at the budget,
// or a 503 after waiting a second for its turn), and a plain chat meanwhile
// is not held up behind them.
func TestCompilesAtOnce(t *testing.T) {
	r := newRig(t, rigOptions{opts: server.Options{BodyLimit: 4 << 20, StructuredCompiles: 1}})
	if rep := r.do(t, "POST", "/v1/chat/completions", schemaBody(`{"type":"string"}`)); rep.Status != 200 {
		t.Fatalf("warm-up: %d %s", rep.Status, rep.Body)
	}
	body := schemaBody(`{"enum":` + enumOf(80_000) + `}`)
	var wg sync.WaitGroup
	statuses := make(chan int, 8)
	for range 8 {
		wg.Go(func() {
			rep := r.do(t, "POST", "/v1/chat/completions", body)
			if rep.Status == 503 && rep.Header.Get("Retry-After") == "" {
				t.Errorf("503 without Retry-After")
			}
			statuses <- rep.Status
		})
	}
	start := time.Now()
	plain := r.do(t, "POST", "/v1/chat/completions", chatBody(`"max_tokens":2`))
	plainTook := time.Since(start)
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	t.Logf("statuses %v; a plain chat meanwhile: %d in %v", counts, plain.Status, plainTook)
	if counts[400]+counts[503] != 8 || counts[400] == 0 {
		t.Errorf("statuses %v, want 400s (and 503s for those that waited too long)", counts)
	}
	if plain.Status != 200 {
		t.Errorf("plain chat: %d %s", plain.Status, plain.Body)
	}
}
