package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// v79 latency emulation (docs/performance.md): each graph call takes at least its v79 time.
var v79Env = []string{"HOSTSIM_LATENCY_US_PREFILL=64500", "HOSTSIM_LATENCY_US_DECODE=55000", "HOSTSIM_LATENCY_US_LMHEAD=7500"}

// ttft streams a completion on model and returns the time to its first token and to its end.
func ttft(tb testing.TB, url, model string, maxTokens int) (first, total time.Duration) {
	tb.Helper()
	body := fmt.Sprintf(`{"model":%q,"prompt":"Once upon a time","max_tokens":%d,"temperature":0,"ignore_eos":true,"stream":true}`, model, maxTokens)
	start := time.Now()
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		tb.Fatalf("%s: status %d", model, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if first == 0 && strings.HasPrefix(line, "data: {") && strings.Contains(line, `"text":"`) && !strings.Contains(line, `"text":""`) {
			first = time.Since(start)
		}
	}
	return first, time.Since(start)
}

func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1)+0.5)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkModels measures, with v79 latency emulation, the tiny QHexRT bundle ("1b") and the
// tiny .pte ("3b") served side by side: load time per model kind (the load-time header),
// the first-request TTFT of an unloaded model against a loaded one, and each model's TTFT while
// a long answer streams from the other (the one NPU shared at graph-call granularity).
//
//	HEXSERVE_BIN=$PWD/bin/hexserve go test ./e2e -run '^$' -bench BenchmarkModels -benchtime 1x
func BenchmarkModels(b *testing.B) {
	pte := mkpte(b, "--kv", "f32", "--logits", "f32", "--ctx", "512")
	for range b.N {
		cfg := modelsConfig(b, []string{
			fmt.Sprintf("{path: %q, id: 1b, preload: true}", bundle(b)),
			fmt.Sprintf("{path: %q, id: 3b}", pte),
		}, "", "")
		s, err := launch(binary(b), cfg, v79Env...)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.waitHealthy(90 * time.Second); err != nil {
			b.Fatal(err)
		}
		measureModels(b, s)
		if err := s.stop(); err != nil {
			b.Error(err)
		}
	}
}

func measureModels(b *testing.B, s *hexserve) {
	// Load time per kind and first-request TTFT: unload (Ollama keep_alive 0), then ask.
	unload := func(model string) {
		resp, err := http.Post(s.URL+"/api/generate", "application/json", strings.NewReader(`{"model":"`+model+`","keep_alive":0}`))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		for range 400 {
			r, err := http.Get(s.URL + "/v1/models/" + model)
			if err != nil {
				b.Fatal(err)
			}
			var buf [4096]byte
			n, _ := r.Body.Read(buf[:])
			r.Body.Close()
			if strings.Contains(string(buf[:n]), `"status":"unloaded"`) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		b.Fatalf("%s did not unload", model)
	}
	loadHeader := func(model string) time.Duration {
		resp, err := http.Post(s.URL+"/v1/completions", "application/json",
			strings.NewReader(`{"model":"`+model+`","prompt":"Hi","max_tokens":1}`))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		sec, err := strconv.ParseFloat(resp.Header.Get("X-Hexserve-Model-Load-Time"), 64)
		if err != nil {
			b.Fatalf("%s: no load-time header (%v)", model, err)
		}
		return time.Duration(sec * float64(time.Second))
	}
	const rounds = 5
	for _, model := range []string{"1b", "3b"} {
		var loads, cold, warm []time.Duration
		for range rounds {
			unload(model)
			loads = append(loads, loadHeader(model))
			unload(model)
			c, _ := ttft(b, s.URL, model, 1)
			w, _ := ttft(b, s.URL, model, 1)
			cold, warm = append(cold, c), append(warm, w)
		}
		b.ReportMetric(ms(pct(loads, 0.5)), "load_ms_p50/"+model)
		b.ReportMetric(ms(pct(cold, 0.5)), "unloaded_ttft_ms_p50/"+model)
		b.ReportMetric(ms(pct(warm, 0.5)), "loaded_ttft_ms_p50/"+model)
	}
	// Two clients on two models: one streams 48 tokens, the other measures its TTFT meanwhile.
	for _, pair := range [][2]string{{"1b", "3b"}, {"3b", "1b"}} {
		streamer, prober := pair[0], pair[1]
		ttft(b, s.URL, prober, 1) // both loaded
		var wg sync.WaitGroup
		done := make(chan struct{})
		var long time.Duration
		wg.Go(func() {
			defer close(done)
			_, long = ttft(b, s.URL, streamer, 48)
		})
		time.Sleep(300 * time.Millisecond) // the stream is decoding
		var probes []time.Duration
	loop:
		for {
			select {
			case <-done:
				break loop
			default:
			}
			f, _ := ttft(b, s.URL, prober, 1)
			probes = append(probes, f)
		}
		wg.Wait()
		if len(probes) < 3 {
			b.Fatalf("only %d probes while %s streamed", len(probes), streamer)
		}
		b.ReportMetric(ms(pct(probes, 0.5)), "ttft_ms_p50/"+prober+"_while_"+streamer+"_streams")
		b.ReportMetric(ms(pct(probes, 0.99)), "ttft_ms_p99/"+prober+"_while_"+streamer+"_streams")
		b.ReportMetric(ms(long), "stream_ms/"+streamer+"_48_tokens")
		b.ReportMetric(float64(len(probes)), "probes/"+prober)
	}
}
