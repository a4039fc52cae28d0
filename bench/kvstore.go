package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/kvstore"
)

// The kvstore phase's workload and goal.
const (
	GoalKVStoreRatio = 0.2 // TTFT of turns 2… with the KV store ÷ without
	kvConversations  = 4
	kvTurns          = 6
	kvFirstHistory   = 300 // tokens of turn 1's prompt (≈ 330 rendered); later turns grow by ≈ 25
	kvLongHistory    = 900 // the same with a context of kvLongContext or more (≈ 1,000-token histories)
	kvLongContext    = 1536
	kvReplyTokens    = 8
	kvMemory         = 512 << 20 // the default engine.kv_cache.memory
)

// KVStoreBench is the kvstore phase: conversations taking turns, each
// turn's time to first token with the KV store and without it.
type KVStoreBench struct {
	Emulation     Latency           `json:"emulation"`
	Conversations int               `json:"conversations"`
	Turns         int               `json:"turns"` // per conversation
	ReplyTokens   int               `json:"reply_tokens"`
	TTFTWithMS    float64           `json:"ttft_with_ms"`    // mean over turns 2…
	TTFTWithoutMS float64           `json:"ttft_without_ms"` // mean over turns 2…
	Ratio         float64           `json:"ratio"`
	ShortTurns    int               `json:"short_turns"`     // turns 2… with the store whose cached_tokens < history cut to Align
	Align         int               `json:"align,omitempty"` // the model's BatchLimits.Align: reuse stops at its multiples
	Store         inference.KVStats `json:"store"`           // at the end of the run with the store
	Detail        []KVTurn          `json:"detail"`
	Skipped       string            `json:"skipped,omitempty"`
}

// KVTurn is one turn of one conversation.
type KVTurn struct {
	Conversation  int     `json:"conversation"`
	Turn          int     `json:"turn"` // from 1
	PromptTokens  int     `json:"prompt_tokens"`
	HistoryTokens int     `json:"history_tokens"` // the previous turn's prompt (0 on turn 1)
	CachedWith    int     `json:"cached_with"`
	CachedWithout int     `json:"cached_without"`
	TTFTWithMS    float64 `json:"ttft_with_ms"`    // 0: not measured (turn 1 without Full)
	TTFTWithoutMS float64 `json:"ttft_without_ms"` // 0: not measured
}

// kvStorePhase runs the conversations twice on fresh engines, with and
// without a KV store (the same prompts), and compares the later turns' TTFT.
func (r *runner) kvStorePhase(ctx context.Context) error {
	defer setLatency(r.emu)()
	convs, turns := kvConversations, kvTurns
	if !r.opt.Full {
		convs, turns = 2, 3
		r.progress("  %d conversations × %d turns, turn 1 only with the store (--full: %d × %d, every turn both ways)", convs, turns, kvConversations, kvTurns)
	}
	kb := KVStoreBench{Emulation: r.emu, Conversations: convs, Turns: turns, ReplyTokens: kvReplyTokens, Detail: []KVTurn{}}
	if b, ok := r.model.(inference.Batcher); ok && b.BatchLimits().Align > 1 {
		kb.Align = b.BatchLimits().Align
	}
	if _, ok := r.model.(inference.SeqKVSnapshotter); !ok {
		kb.Skipped = "the model cannot save its KV rows"
		r.progress("  skipped: %s", kb.Skipped)
		r.rep.KVStore = kb
		return nil
	}
	first := kvFirstHistory
	if r.info.ContextLen >= kvLongContext {
		first = kvLongHistory
	}
	if last := first + turns*35; last > r.info.ContextLen {
		kb.Skipped = fmt.Sprintf("%d-token conversations do not fit the %d-token context", last, r.info.ContextLen)
		r.progress("  skipped: %s", kb.Skipped)
		r.rep.KVStore = kb
		return nil
	}
	// The first pass builds the conversations from its replies and
	// records every turn's prompt; the second sends the same prompts.
	// Without the store nothing is cached across requests, so by default
	// the pass without it runs only the turns in the ratio (2…), after the
	// pass with it; --full runs both passes whole, without the store first.
	order := []bool{true, false}
	if r.opt.Full {
		order = []bool{false, true}
	}
	prompts := make([][][]int32, convs)
	for pass, withStore := range order {
		if err := r.kvPass(ctx, &kb, prompts, pass, withStore, first); err != nil {
			return err
		}
	}
	kb.summarise()
	r.rep.KVStore = kb
	return nil
}

// kvPass runs every conversation's turns on a fresh engine, with or
// without a KV store, and notes each turn's cached tokens and TTFT in
// kb.Detail. Pass 0 builds the conversations from its replies and records
// their prompts; pass 1 sends the same prompts (by default not turn 1's).
func (r *runner) kvPass(ctx context.Context, kb *KVStoreBench, prompts [][][]int32, pass int, withStore bool, first int) error {
	convs, turns := kb.Conversations, kb.Turns
	var e *inference.Engine
	var store *kvstore.Store
	if withStore {
		var err error
		if e, store, err = r.serverEngine(); err != nil {
			return err
		}
	} else {
		e = inference.New(r.model, r.tok, inference.Config{})
	}
	defer func() {
		e.Close()
		if store != nil {
			kb.Store = store.Stats()
		}
	}()
	msgs := make([][]chat.Message, convs)
	for c := range msgs {
		msgs[c] = r.conversation(c, first)
	}
	hist := make([]int, convs)
	for turn := 1; turn <= turns; turn++ {
		for c := range convs {
			if pass == 1 && turn == 1 && !r.opt.Full {
				continue
			}
			r.progress("  %s: conversation %d, turn %d/%d", map[bool]string{false: "without the store", true: "with the store"}[withStore], c+1, turn, turns)
			var prompt []int32
			if pass == 0 {
				prompt = r.encode(msgs[c], true)
				prompts[c] = append(prompts[c], prompt)
			} else {
				prompt = prompts[c][turn-1]
			}
			if len(prompt)+kvReplyTokens > r.info.ContextLen {
				return fmt.Errorf("conversation %d, turn %d: %d prompt tokens leave no room in the %d-token context", c+1, turn, len(prompt), r.info.ContextLen)
			}
			res, t0, arr, err := request(ctx, e, inference.Request{Prompt: prompt, MaxTokens: kvReplyTokens, IgnoreEOS: true,
				CacheKey: fmt.Sprint("conversation-", c)})
			if err != nil {
				return err
			}
			if len(arr) == 0 {
				return fmt.Errorf("conversation %d, turn %d: no tokens", c, turn)
			}
			ttft := ms(arr[0].Sub(t0))
			if pass == 0 {
				kb.Detail = append(kb.Detail, KVTurn{Conversation: c + 1, Turn: turn, PromptTokens: len(prompt), HistoryTokens: hist[c]})
			}
			d := &kb.Detail[(turn-1)*convs+c]
			if withStore {
				d.CachedWith, d.TTFTWithMS = res.Usage.CachedTokens, ttft
			} else {
				d.CachedWithout, d.TTFTWithoutMS = res.Usage.CachedTokens, ttft
			}
			hist[c] = len(prompt)
			reply := ""
			if len(res.Choices) > 0 {
				reply = res.Choices[0].Text
			}
			msgs[c] = append(msgs[c], chat.Message{Role: "assistant", Content: reply},
				chat.Message{Role: "user", Content: fmt.Sprintf("And case %d?", c+1)})
		}
	}
	return nil
}

// summarise averages the later turns' TTFT with and without the store and
// counts the turns that restored less than their history (cut to a
// multiple of Align on a model that states one: its reuse stops there).
func (kb *KVStoreBench) summarise() {
	var with, without float64
	for _, d := range kb.Detail {
		if d.Turn < 2 {
			continue
		}
		with += d.TTFTWithMS
		without += d.TTFTWithoutMS
		if h := d.HistoryTokens; d.CachedWith < h-h%max(kb.Align, 1) {
			kb.ShortTurns++
		}
	}
	n := float64(kb.Conversations * (kb.Turns - 1))
	kb.TTFTWithMS, kb.TTFTWithoutMS = round3(with/n), round3(without/n)
	if without > 0 {
		kb.Ratio = round3(with / without)
	}
}

// conversation c: its own system prompt and user/assistant pairs from the
// paragraph (starting at a different sentence per conversation) until the
// rendered prompt has about n tokens.
func (r *runner) conversation(c, n int) []chat.Message {
	sentences := strings.SplitAfter(Paragraph, ". ")
	msgs := []chat.Message{{Role: "system", Content: fmt.Sprintf("You are assistant %d of a team; answer case %d briefly.", c+1, c+1)}}
	for i := 17 * c; len(r.encode(msgs, true)) < n; i += 2 {
		msgs = append(msgs, chat.Message{Role: "user", Content: strings.TrimSpace(sentences[i%len(sentences)])},
			chat.Message{Role: "assistant", Content: strings.TrimSpace(sentences[(i+1)%len(sentences)])})
	}
	return append(msgs, chat.Message{Role: "user", Content: fmt.Sprintf("Summarise case %d.", c+1)})
}

// kvTurnGoals are the phase's goals.
func kvTurnGoals(k KVStoreBench) []Goal {
	if k.Ratio <= 0 {
		return nil
	}
	short := "turns 2… whose cached_tokens < the previous prompt"
	if k.Align > 1 {
		short += fmt.Sprintf(" cut to a multiple of %d (the model's alignment)", k.Align)
	}
	return []Goal{
		goal("kvstore_ttft_ratio", k.Ratio, "<=", GoalKVStoreRatio, "",
			fmt.Sprintf("%d conversations × %d turns, turns 2–%d", k.Conversations, k.Turns, k.Turns)),
		goal("kvstore_turns_short_of_history", float64(k.ShortTurns), "<=", 0, "turns", short),
	}
}
