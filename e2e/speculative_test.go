package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestSpeculativeEquivalence: on a chunked float32-KV bundle, greedy output
// with speculation (predictions and prompt lookup) is the output without it,
// through the API, for random prompts and predictions that are right, partly
// right, wrong, empty and longer than the context, on both endpoints; a
// seeded sampled request gives the same text too. A right prediction is
// mostly accepted.
func TestSpeculativeEquivalence(t *testing.T) {
	libs := hostsimLibs(t)
	dir := mkmodelOnce(t, "--preset", "tiny", "--contract", "chunked", "--weights", "f16", "--io", "f32", "--kv", "f32")
	off := serve(t, config{Bundle: dir, Extra: "engine:\n  speculative:\n    enabled: false"}.write(t, libs), true)
	// v79 latency floors make the graphs' costs those of a phone, where
	// verifying pays (on hostsim alone the lm-head's CPU time dominates and
	// the planner rightly decodes plainly).
	on := serve(t, config{Bundle: dir}.write(t, libs), true,
		"HOSTSIM_LATENCY_US_PREFILL=64500", "HOSTSIM_LATENCY_US_DECODE=55000", "HOSTSIM_LATENCY_US_LMHEAD=7500")

	r := rand.New(rand.NewPCG(16, 16))
	words := strings.Fields("the a lighthouse keeper wrote code in Go and Python while the sea rose over rocks; " +
		"func main() { return x + 1 } print(hello) story of France capital answer explain")
	randomText := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[r.IntN(len(words))])
		}
		return b.String()
	}
	predictions := []struct {
		name string
		make func(out string) string
	}{
		{"right", func(out string) string { return out }},
		{"partly right", func(out string) string {
			i := len(out) / 3
			return out[:i] + " inserted words " + out[i+len(out)/6:]
		}},
		{"wrong", func(string) string { return randomText(40) }},
		{"empty", func(string) string { return "" }},
		{"longer than the context", func(out string) string { return strings.Repeat(out+"\n", 40) }},
	}
	for _, endpoint := range []string{"/v1/chat/completions", "/v1/completions"} {
		for trial := range 2 {
			prompt := randomText(10 + r.IntN(30))
			base := map[string]any{"model": "tinyllama-public", "temperature": 0, "max_tokens": 32}
			if endpoint == "/v1/chat/completions" {
				base["messages"] = []map[string]string{{"role": "user", "content": prompt}}
			} else {
				base["prompt"] = prompt
			}
			want, _ := complete(t, off, endpoint, base)
			for _, p := range predictions {
				req := clone(base)
				req["prediction"] = map[string]any{"type": "content", "content": p.make(want)}
				got, usage := complete(t, on, endpoint, req)
				if got != want {
					t.Errorf("%s trial %d, %s prediction: speculation changed the output\ngot  %q\nwant %q", endpoint, trial, p.name, got, want)
				}
				if p.name == "right" && usage.Details.Accepted < usage.Completion/2 {
					t.Errorf("%s trial %d: a right prediction had %d of %d tokens accepted (%d rejected)",
						endpoint, trial, usage.Details.Accepted, usage.Completion, usage.Details.Rejected)
				}
				if p.name == "empty" && usage.Details.Accepted+usage.Details.Rejected != 0 {
					t.Errorf("%s: an empty prediction reports %+v", endpoint, usage.Details)
				}
			}
			// Seeded sampling: the same text with and without speculation.
			seeded := clone(base)
			seeded["temperature"], seeded["seed"] = 1.2, 7
			want, _ = complete(t, off, endpoint, seeded)
			seeded["prediction"] = map[string]any{"type": "content", "content": want}
			if got, _ := complete(t, on, endpoint, seeded); got != want {
				t.Errorf("%s trial %d: seeded output changed by speculation\ngot  %q\nwant %q", endpoint, trial, got, want)
			}
		}
	}
	// Streaming, and structured outputs (the constraint applies to every
	// verified token), give the same text too.
	chat := map[string]any{"model": "tinyllama-public", "temperature": 0, "max_tokens": 32,
		"messages": []map[string]string{{"role": "user", "content": randomText(20)}}}
	want, _ := complete(t, off, "/v1/chat/completions", chat)
	streamReq := clone(chat)
	streamReq["stream"], streamReq["prediction"] = true, map[string]any{"type": "content", "content": want}
	body, _ := json.Marshal(streamReq)
	if rep := on.post(t, "/v1/chat/completions", string(body)); rep.Status != 200 {
		t.Errorf("streaming: %d %s", rep.Status, rep.Body)
	} else if got, _ := streamed(t, rep.Body); got != want {
		t.Errorf("streaming with a prediction: %q, want %q", got, want)
	}
	structured := clone(chat)
	structured["response_format"] = map[string]any{"type": "json_object"}
	want, _ = complete(t, off, "/v1/chat/completions", structured)
	structured["prediction"] = map[string]any{"type": "content", "content": want}
	if got, u := complete(t, on, "/v1/chat/completions", structured); got != want {
		t.Errorf("json_object with a prediction: %q, want %q", got, want)
	} else if u.Details.Accepted == 0 {
		t.Errorf("json_object: no prediction token accepted (%+v): speculation did not run", u)
	}

	// A malformed prediction is a 400 naming the parameter.
	rep := on.post(t, "/v1/chat/completions", `{"model":"tinyllama-public","messages":[{"role":"user","content":"hi"}],"prediction":{"type":"text","content":"x"}}`)
	if rep.Status != 400 || !strings.Contains(rep.Body, `"param":"prediction.type"`) {
		t.Errorf("bad prediction type: %d %s", rep.Status, rep.Body)
	}
}

type specUsage struct {
	Completion int `json:"completion_tokens"`
	Details    struct {
		Accepted int `json:"accepted_prediction_tokens"`
		Rejected int `json:"rejected_prediction_tokens"`
	} `json:"completion_tokens_details"`
}

func clone(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// complete posts a non-streaming request and returns the text and usage.
func complete(t *testing.T, s *hexserve, endpoint string, req map[string]any) (string, specUsage) {
	t.Helper()
	body, _ := json.Marshal(req)
	rep := s.post(t, endpoint, string(body))
	var r struct {
		Choices []struct {
			Text    string
			Message struct{ Content string }
		}
		Usage specUsage
	}
	if rep.Status != 200 || json.Unmarshal([]byte(rep.Body), &r) != nil || len(r.Choices) != 1 {
		t.Fatalf("%s: %d %s", endpoint, rep.Status, rep.Body)
	}
	text := r.Choices[0].Text
	if endpoint == "/v1/chat/completions" {
		text = r.Choices[0].Message.Content
	}
	if text == "" {
		t.Fatal(fmt.Sprintf("%s: empty output: %s", endpoint, rep.Body))
	}
	return text, r.Usage
}
