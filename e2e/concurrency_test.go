package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestConcurrentEqualsAlone: greedy and seeded requests (streaming and
// not, n = 2, with a prediction) give the same text when 4 or 8 clients ask
// at once on a side-by-side engine as when each runs alone on a
// one-at-a-time engine, on every model kind: a float32 .pte, float32 QHexRT
// bundles (a chunked one: rows of several requests per prefill call; a
// QHexRT-contract one: the requests take turns on their own KV buffers) and
// a Genie bundle (the requests side by side in shared AR-A calls).
func TestConcurrentEqualsAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("serves two servers per model and runs 12 requests on each (-short)")
	}
	bundle := func(contract string) func(t *testing.T) string {
		return func(t *testing.T) string {
			return mkmodelOnce(t, "--preset", "tiny", "--name", "tiny", "--contract", contract, "--weights", "f16", "--io", "f32", "--kv", "f32")
		}
	}
	for _, tc := range []struct {
		name  string
		model func(t *testing.T) string // a path for model.path
		// shares: the runner puts several sequences' rows in one call,
		// so side by side takes fewer steps. A QHexRT-contract bundle's
		// runs take turns (a call each), and the plan gives each step one
		// decode row.
		shares bool
	}{
		{"pte", func(t *testing.T) string {
			return mkpte(t, "--kv", "f32", "--logits", "f32", "--ctx", "512", "--prefill-chunk", "16")
		}, true},
		{"chunked", bundle("chunked"), true},
		{"qhexrt", bundle("qhexrt"), false},
		{"genie", func(t *testing.T) string { return mkgenie(t, "--precision", "f32", "--prefill-chunk", "32") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) { concurrentEqualsAlone(t, tc.model(t), tc.shares) })
	}
}

// concurrentEqualsAlone checks model (a path for model.path) as
// TestConcurrentEqualsAlone does, and, when shares, that the clients shared
// steps.
func concurrentEqualsAlone(t *testing.T, model string, shares bool) {
	libs := hostsimLibs(t)
	// A multi-row call costs what a one-row call costs, as on the NPU: both
	// servers' hostsim waits out a 4 ms floor per call (the tiny model
	// computes well within it), so the planner's choice of shared steps
	// does not hang on how loaded the machine is.
	npu := []string{"HOSTSIM_LATENCY_US_PREFILL=4000", "HOSTSIM_LATENCY_US_DECODE=4000"}
	serial := serve(t, config{Model: fmt.Sprintf("  path: %q", model), Extra: "engine:\n  max_sequences: 1"}.write(t, libs), true, npu...)
	side := serve(t, config{Model: fmt.Sprintf("  path: %q", model), Extra: "engine:\n  max_sequences: 8\n  queue_length: 16"}.write(t, libs), true, npu...)
	msg := func(s string) []map[string]string { return []map[string]string{{"role": "user", "content": s}} }
	reqs := []map[string]any{
		{"messages": msg("Tell me about lighthouses."), "temperature": 0, "max_tokens": 20},
		{"messages": msg("Write a poem about the sea."), "temperature": 1, "seed": 5, "max_tokens": 18, "stream": true},
		{"messages": msg("Name three colours."), "temperature": 0.8, "top_p": 0.9, "seed": 11, "max_tokens": 16, "n": 2},
		{"messages": msg("Repeat: the keeper climbs the stairs."), "temperature": 0, "max_tokens": 20,
			"prediction": map[string]any{"type": "content", "content": "the keeper climbs the stairs"}},
		{"prompt": "Once upon a time", "temperature": 0, "max_tokens": 20, "stream": true},
		{"prompt": "The recipe for bread:", "temperature": 1, "seed": 3, "max_tokens": 14, "n": 2, "stream": true},
		{"messages": msg("Count to ten."), "temperature": 0, "max_tokens": 24, "stream": true,
			"prediction": map[string]any{"type": "content", "content": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10"}},
		{"prompt": "Hello", "temperature": 0.7, "seed": 8, "max_tokens": 12},
	}
	for _, r := range reqs {
		r["model"] = "tiny"
	}
	want := make([][]string, len(reqs))
	for i, r := range reqs {
		got, err := ask(serial.URL, r)
		if err != nil {
			t.Fatalf("alone %d: %v", i, err)
		}
		want[i] = got
	}
	for _, clients := range []int{4, 8} {
		got := make([][]string, clients)
		errs := make([]error, clients)
		var wg sync.WaitGroup
		for i := range clients {
			wg.Go(func() { got[i], errs[i] = ask(side.URL, reqs[i]) })
		}
		wg.Wait()
		for i := range clients {
			if errs[i] != nil {
				t.Fatalf("%d clients, request %d: %v", clients, i, errs[i])
			}
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("%d clients, request %d: %q, alone %q", clients, i, got[i], want[i])
			}
		}
	}
	// The clients did share steps: the side-by-side server ran the 8
	// requests, and the first 4 again, in fewer steps than the one-at-a-time
	// server took for the 8 alone. (Rows per step would also count prompt rows,
	// which the prefix cache takes away at a rate that depends on timing.)
	_, serialSteps := stepRows(t, serial)
	rows, steps := stepRows(t, side)
	if shares && (steps == 0 || steps >= serialSteps) {
		t.Errorf("side by side %g steps (%g rows) for 12 requests, one at a time %g for 8: the clients did not share steps", steps, rows, serialSteps)
	}
	t.Logf("side by side: %g rows in %g steps for 12 requests; one at a time: %g steps for 8", rows, steps, serialSteps)
}

// stepRows reads s's hexserve_step_rows histogram: its rows and steps.
func stepRows(t *testing.T, s *hexserve) (rows, steps float64) {
	for _, line := range strings.Split(s.metrics(t), "\n") {
		// hexserve_step_rows_sum{model="tiny"} 490 (labelled per model)
		f := strings.Fields(line)
		switch {
		case len(f) != 2:
		case strings.HasPrefix(f[0], "hexserve_step_rows_sum"):
			fmt.Sscanf(f[1], "%g", &rows)
		case strings.HasPrefix(f[0], "hexserve_step_rows_count"):
			fmt.Sscanf(f[1], "%g", &steps)
		}
	}
	return rows, steps
}

// ask sends req to its endpoint (prompt: completions, else chat) and
// returns each choice's text, streamed or not.
func ask(base string, req map[string]any) ([]string, error) {
	path := "/v1/chat/completions"
	if _, ok := req["prompt"]; ok {
		path = "/v1/completions"
	}
	body, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, "POST", base+path, strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	type choice struct {
		Index   int
		Text    string
		Message struct{ Content string }
		Delta   struct{ Content string }
	}
	var texts []string
	add := func(cs []choice) {
		for _, c := range cs {
			for len(texts) <= c.Index {
				texts = append(texts, "")
			}
			texts[c.Index] += c.Text + c.Message.Content + c.Delta.Content
		}
	}
	if req["stream"] != true {
		var r struct{ Choices []choice }
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return nil, err
		}
		add(r.Choices)
		return texts, nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct{ Choices []choice }
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return nil, fmt.Errorf("chunk %s: %v", data, err)
		}
		add(ch.Choices)
	}
	return texts, sc.Err()
}

// TestBurstAdmission: a burst larger than queue_length is refused only when
// the sequence slots are taken too: with queue_length 1 and max_sequences
// 4, five simultaneous requests all get 200.
func TestBurstAdmission(t *testing.T) {
	libs := hostsimLibs(t)
	s := serve(t, config{Bundle: bundle(t), Extra: "engine:\n  queue_length: 1\n  max_sequences: 4"}.write(t, libs), true)
	status := make([]int, 5)
	var wg sync.WaitGroup
	for i := range status {
		wg.Go(func() {
			body := fmt.Sprintf(`{"model":"tinyllama-public","prompt":"Burst %d","max_tokens":8,"temperature":0}`, i)
			status[i] = s.post(t, "/v1/completions", body).Status
		})
	}
	wg.Wait()
	for i, st := range status {
		if st != 200 {
			t.Errorf("request %d of the burst: %d, want 200 (statuses %v)", i, st, status)
		}
	}
}
