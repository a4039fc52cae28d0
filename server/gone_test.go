package server_test

import (
	"bufio"
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestStreamGone499 (issue #39 finding 8): a stream whose client goes away
// mid-way is logged and counted as 499, in every API, not as the 200 it
// began with; a stream read to its end stays 200.
func TestStreamGone499(t *testing.T) {
	tok := loadTok(t)
	r := newRig(t, rigOptions{script: tok.Encode(strings.Repeat(" word", 100), false, false)})
	r.Model.SetLatency(20 * time.Millisecond)
	msgs := `"messages":[{"role":"user","content":"Hi"}]`
	cases := []struct{ path, route, body string }{
		{"/v1/chat/completions", "/v1/chat/completions", chatBody(`"stream":true,"max_tokens":100`)},
		{"/api/chat", "/api/chat", `{"model":"` + modelID + `",` + msgs + `,"options":{"num_predict":100}}`},
		{"/v1/messages", "/v1/messages", `{"model":"` + modelID + `","max_tokens":100,"stream":true,` + msgs + `}`},
	}
	for _, c := range cases {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", r.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for lines := 0; lines < 4 && sc.Scan(); lines++ {
		}
		cancel()
		resp.Body.Close()
	}
	full := r.do(t, "POST", "/v1/chat/completions", chatBody(`"stream":true,"max_tokens":3`))
	if full.Status != 200 {
		t.Fatalf("a stream read to its end: %d", full.Status)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		metrics := string(r.do(t, "GET", "/metrics", "").Body)
		missing := ""
		for _, c := range cases {
			if !regexp.MustCompile(`hexserve_http_requests_total\{method="POST",route="` + c.route + `",status="499"\} 1\b`).MatchString(metrics) {
				missing = c.route
			}
		}
		ok200 := regexp.MustCompile(`hexserve_http_requests_total\{method="POST",route="/v1/chat/completions",status="200"\} 1\b`).MatchString(metrics)
		if missing == "" && ok200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 499 for %q (or not one 200 for the full stream):\n%s", missing, grepLines(metrics, "hexserve_http_requests_total"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	logged := 0
	for _, line := range strings.Split(r.Log.String(), "\n") {
		if strings.Contains(line, `"message":"request"`) && strings.Contains(line, `"status":499`) {
			logged++
		}
	}
	if logged != len(cases) {
		t.Errorf("%d access log lines with status 499, want %d", logged, len(cases))
	}
}

func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
