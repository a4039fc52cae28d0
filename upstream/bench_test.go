package upstream

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The relay benchmarks measure what the relay adds on loopback: each
// reports the p50 and p99 of the same measurement taken directly from the
// upstream and through a relay in front of it, and the difference of the
// p50s (added-µs). docs/performance.md has the figures.

// tokenServer streams n SSE chunks like a chat completion stream; each
// carries the time it was written, and the next is written only after the
// client has read it (next), so every sample is one frame's transit alone.
func tokenServer(next <-chan struct{}) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ N int }
		json.NewDecoder(r.Body).Decode(&req)
		n := req.N
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for i := 0; i < n; i++ {
			fmt.Fprintf(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"remote","choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}],"t":%d}`+"\n\n", time.Now().UnixNano())
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
}

// streamLatencies reads a stream of n tokens from url and returns each
// frame's transit time.
func streamLatencies(b *testing.B, url string, n int, next chan<- struct{}) []time.Duration {
	resp, err := http.Post(url, "application/json", strings.NewReader(fmt.Sprintf(`{"model":"local","stream":true,"n":%d}`, n)))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out := make([]time.Duration, 0, n)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndex(line, `"t":`)
		if i < 0 {
			continue
		}
		ts, _ := strconv.ParseInt(strings.TrimSuffix(line[i+4:], "}"), 10, 64)
		out = append(out, time.Since(time.Unix(0, ts)))
		next <- struct{}{}
	}
	if len(out) != n {
		b.Fatalf("read %d tokens of %d", len(out), n)
	}
	return out
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func report(b *testing.B, unit string, direct, relayed []time.Duration) {
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(us(quantile(direct, .5)), "direct-p50-µs/"+unit)
	b.ReportMetric(us(quantile(direct, .99)), "direct-p99-µs/"+unit)
	b.ReportMetric(us(quantile(relayed, .5)), "relayed-p50-µs/"+unit)
	b.ReportMetric(us(quantile(relayed, .99)), "relayed-p99-µs/"+unit)
	b.ReportMetric(us(quantile(relayed, .5)-quantile(direct, .5)), "added-p50-µs/"+unit)
	b.ReportMetric(0, "ns/op")
}

// BenchmarkRelayStreamToken: the transit of one streamed token, b.N tokens
// in streams of up to 1000.
func BenchmarkRelayStreamToken(b *testing.B) {
	next := make(chan struct{})
	up := tokenServer(next)
	defer up.Close()
	f := front(b, newClient(b, up.URL, Options{}), "")
	var direct, relayed []time.Duration
	for left := b.N; left > 0; left -= 1000 {
		n := min(left, 1000)
		direct = append(direct, streamLatencies(b, up.URL, n, next)...)
		relayed = append(relayed, streamLatencies(b, f.URL, n, next)...)
	}
	report(b, "token", direct, relayed)
}

// BenchmarkRelayRequest: one whole small request (a non-streamed
// completion's reply), b.N of them each way.
func BenchmarkRelayRequest(b *testing.B) {
	body := `{"id":"cmpl-1","object":"text_completion","created":1,"model":"remote","choices":[{"text":" a short answer","index":0,"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}))
	defer up.Close()
	f := front(b, newClient(b, up.URL, Options{}), "")
	one := func(url string) time.Duration {
		start := time.Now()
		resp, err := http.Post(url, "application/json", strings.NewReader(`{"model":"local","prompt":"The sea is","max_tokens":4}`))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(start)
	}
	var direct, relayed []time.Duration
	for i := 0; i < b.N; i++ {
		direct = append(direct, one(up.URL))
		relayed = append(relayed, one(f.URL))
	}
	report(b, "request", direct, relayed)
}

// BenchmarkScrubCrafted: a 1 MiB reply made to cost the scrubber most,
// near-misses of the key and host written with JSON escapes; the cost is
// linear in its size (bytes/s).
func BenchmarkScrubCrafted(b *testing.B) {
	c := newClient(b, "http://127.0.0.1:1/v1", Options{})
	near := uEscape(testKey[:len(testKey)-1] + "_127.0.0._")
	text := []byte(strings.Repeat(near[1:len(near)-1], 1<<20/(len(near)-2)))
	h := hold{max: 1 << 40}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := c.clean(text, &h); err != nil {
			b.Fatal(err)
		}
	}
}
