package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/server"
	"github.com/rs/zerolog"
)

// sseRequest serves e on a loopback port and streams one chat completion
// to an SSE client. It returns when the request was sent and the arrival
// times of the first and last content chunks.
// arrivals holds the client-side arrival time of each generated token, in
// order; end is that of the last chunk with tokens or a finish reason (an
// end-of-turn token ends the stream without a token of its own).
func (r *runner) sseRequest(ctx context.Context, e *inference.Engine, tokens, run int) (t0 time.Time, arrivals []time.Time, end time.Time, err error) {
	srv := server.New(server.Options{Logger: zerolog.Nop()})
	srv.SetModel(&server.Model{ID: "bench", Created: time.Now(), ContextLen: r.info.ContextLen, Tokenizer: r.tok, Engine: e})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return t0, nil, end, err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()

	body, _ := json.Marshal(map[string]any{
		"model":            "bench",
		"messages":         []map[string]string{{"role": "user", "content": fmt.Sprintf("(%d) %s", run, r.chatText())}},
		"max_tokens":       tokens,
		"temperature":      0,
		"stream":           true,
		"stream_options":   map[string]bool{"include_usage": true},
		"return_token_ids": true, // each chunk names its tokens: per-token arrival times
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+ln.Addr().String()+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return t0, nil, end, err
	}
	req.Header.Set("Content-Type", "application/json")
	t0 = time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return t0, nil, end, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return t0, nil, end, fmt.Errorf("POST /v1/chat/completions: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return t0, nil, end, fmt.Errorf("POST /v1/chat/completions with stream: Content-Type %q, want text/event-stream", ct)
	}
	arrivals, end, done, err := readSSE(resp.Body)
	if err != nil {
		return t0, arrivals, end, err
	}
	if !done {
		return t0, arrivals, end, errors.New("the SSE stream ended without data: [DONE]")
	}
	if len(arrivals) == 0 {
		return t0, arrivals, end, errors.New("the SSE stream carried no tokens")
	}
	return t0, arrivals, end, nil
}

// readSSE reads a chat completion stream requested with return_token_ids and
// returns the arrival time of each token (the time its chunk was read), and
// whether [DONE] came.
func readSSE(rd io.Reader) (arrivals []time.Time, end time.Time, done bool, err error) {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		now := time.Now()
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			return arrivals, end, true, nil
		}
		var chunk struct {
			Choices []struct {
				TokenIDs     []int32 `json:"token_ids"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return arrivals, end, false, fmt.Errorf("SSE chunk %.80q: %w", data, err)
		}
		if chunk.Error != nil {
			return arrivals, end, false, fmt.Errorf("SSE error: %s", chunk.Error.Message)
		}
		for _, c := range chunk.Choices {
			for range c.TokenIDs {
				arrivals = append(arrivals, now)
			}
			if len(c.TokenIDs) > 0 || c.FinishReason != nil {
				end = now
			}
		}
	}
	return arrivals, end, false, sc.Err()
}

// chatText is the start of the paragraph, short enough that the rendered
// chat prompt (about 30 template tokens) fits one prefill window.
func (r *runner) chatText() string {
	ids := r.tok.Encode(Paragraph, false, false)
	n := min(max(r.info.PrefillWindow-40, 8), len(ids))
	return r.tok.Decode(ids[:n], false)
}
