package bench

import (
	"context"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/kvstore"
)

// prefixPhase times turn 2 of a chat on an engine built as the server
// builds it (serverEngine: turn 1's rows kept by the KV store and found by
// prefix, as for a client that sends the whole conversation again), and on
// a fresh engine without a store (no cached rows), r.fewRuns() times: the
// uncached turn 2 is a sum of hundreds of emulated calls, and every run
// first reads turn 1 at emulated speed (hostsim-speed calls would skew the
// runner's measured costs, which pick its graphs).
func (r *runner) prefixPhase(ctx context.Context) error {
	defer setLatency(r.emu)()
	pc := PrefixCache{Emulation: r.emu}
	hist := r.chatHistory(historyTokens)
	turn1 := r.encode(hist, true)
	if len(turn1)+prefixReplyToks+64 > r.info.ContextLen {
		r.progress("  skipped: a %d-token history does not fit the %d-token context", len(turn1), r.info.ContextLen)
		return nil
	}
	pc.HistoryTokens = len(turn1)
	var cached, uncached []float64
	for run := range r.fewRuns() {
		r.progress("  turn 2 with and without the cache %d/%d", run+1, r.fewRuns())
		e, _, err := r.serverEngine()
		if err != nil {
			return err
		}
		res, _, _, err := request(ctx, e, inference.Request{Prompt: turn1, MaxTokens: prefixReplyToks, IgnoreEOS: true})
		if err != nil {
			e.Close()
			return err
		}
		reply := ""
		if len(res.Choices) > 0 {
			reply = res.Choices[0].Text
		}
		turn2 := r.encode(append(hist, chat.Message{Role: "assistant", Content: reply},
			chat.Message{Role: "user", Content: "Why?"}), true)
		pc.Turn2Tokens = len(turn2)
		t0 := time.Now()
		res, _, _, err = request(ctx, e, inference.Request{Prompt: turn2, MaxTokens: 1})
		d := time.Since(t0)
		e.Close()
		if err != nil {
			return err
		}
		cached = append(cached, ms(d))
		pc.CachedTokens = res.Usage.CachedTokens

		e = inference.New(r.model, r.tok, inference.Config{}) // a fresh engine without a store: nothing cached
		t0 = time.Now()
		_, _, _, err = request(ctx, e, inference.Request{Prompt: turn2, MaxTokens: 1})
		d = time.Since(t0)
		e.Close()
		if err != nil {
			return err
		}
		uncached = append(uncached, ms(d))
	}
	pc.TTFTCachedMS, pc.TTFTUncachedMS = median(cached), median(uncached)
	if pc.TTFTUncachedMS > 0 {
		pc.Ratio = round3(pc.TTFTCachedMS / pc.TTFTUncachedMS)
	}
	r.rep.PrefixCache = pc
	return nil
}

// serverEngine builds an engine as the server does for a model: its
// default sequences side by side and, when the model can save its KV
// rows, a KV store of the default engine.kv_cache.memory, which keeps a
// finished request's rows for the next request that starts with them (the
// server's prefix cache across requests). The store is nil when the model
// cannot save its rows.
func (r *runner) serverEngine() (*inference.Engine, *kvstore.Store, error) {
	var cfg inference.Config
	var store *kvstore.Store
	if snap, ok := r.model.(inference.SeqKVSnapshotter); ok {
		var err error
		if store, err = kvstore.Open(kvstore.Config{Layout: snap.KVLayout(), Memory: kvMemory, Logger: zerolog.Nop()}); err != nil {
			return nil, nil, err
		}
		cfg.KVStore = store
	}
	return inference.New(r.model, r.tok, cfg), store, nil
}

// chatHistory builds a conversation whose rendered prompt has about n tokens.
func (r *runner) chatHistory(n int) []chat.Message {
	sentences := strings.SplitAfter(Paragraph, ". ")
	msgs := []chat.Message{{Role: "system", Content: "You are a concise assistant."}}
	for i := 0; ; i += 2 {
		if len(r.encode(msgs, true)) >= n || i+1 >= len(sentences) {
			break
		}
		msgs = append(msgs, chat.Message{Role: "user", Content: strings.TrimSpace(sentences[i])},
			chat.Message{Role: "assistant", Content: strings.TrimSpace(sentences[i+1])})
	}
	return append(msgs, chat.Message{Role: "user", Content: "Summarise that in one line."})
}

// encode renders and tokenizes messages the way the server does.
func (r *runner) encode(msgs []chat.Message, genPrompt bool) []int32 {
	toks, err := apiconv.EncodeChat(r.tok, msgs, chat.Options{AddGenerationPrompt: genPrompt}, "")
	if err != nil {
		return nil
	}
	return toks
}
