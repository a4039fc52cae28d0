package overflow

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/internal/costtest"
)

// measure is a stand-in for rendering and tokenizing: BOS and the tools,
// then each message's header, text (a token per 4 bytes) and calls.
func measure(msgs []chat.Message) ([]int32, error) {
	n := 1 + 20
	for _, m := range msgs {
		n += 4 + len(m.Content)/4 + 10*len(m.ToolCalls)
	}
	return make([]int32, n), nil
}

// conversation generates a random conversation: 0-2 system (or developer)
// messages at the start, sometimes one later, then turns of a user message
// and assistant replies, some calling 1-3 tools whose results follow (with
// ids, or without as Ollama's clients send them), and now and then roles
// out of the usual order.
func conversation(r *rand.Rand) []chat.Message {
	n := 0 // texts are unique, so kept messages map back to their places
	text := func() string { n++; return fmt.Sprint(n, strings.Repeat("w", r.IntN(200))) }
	var msgs []chat.Message
	for range r.IntN(3) {
		msgs = append(msgs, chat.Message{Role: []string{"system", "developer"}[r.IntN(2)], Content: text()})
	}
	if r.IntN(4) == 0 {
		msgs = append(msgs, chat.Message{Role: "assistant", Content: text()}) // a greeting before any user
	}
	call := 0
	for turns := 1 + r.IntN(12); turns > 0; turns-- {
		msgs = append(msgs, chat.Message{Role: "user", Content: text()})
		if r.IntN(8) == 0 {
			msgs = append(msgs, chat.Message{Role: "user", Content: text()}) // two in a row
		}
		if r.IntN(10) == 0 {
			msgs = append(msgs, chat.Message{Role: "system", Content: text()})
		}
		for steps := r.IntN(3); steps > 0; steps-- {
			if r.IntN(2) == 0 {
				msgs = append(msgs, chat.Message{Role: "assistant", Content: text()})
				continue
			}
			ids := r.IntN(3) > 0
			a := chat.Message{Role: "assistant"}
			for range 1 + r.IntN(3) {
				call++
				a.ToolCalls = append(a.ToolCalls, chat.ToolCall{ID: fmt.Sprint("call", call), Name: "f"})
			}
			msgs = append(msgs, a)
			results := slices.Clone(a.ToolCalls)
			r.Shuffle(len(results), func(i, j int) { results[i], results[j] = results[j], results[i] })
			for k, c := range results {
				if k > 0 && r.IntN(10) == 0 {
					msgs = append(msgs, chat.Message{Role: "user", Content: text()}) // a user between the results
				}
				m := chat.Message{Role: "tool", Content: text()}
				if ids {
					m.ToolCallID = c.ID
				}
				msgs = append(msgs, m)
			}
		}
	}
	return msgs
}

// TestFitProperties checks, over generated conversations, policies and
// budgets, that a fitted conversation keeps every system message, the last
// user turn (and with truncate_middle the first), never a tool call
// without all its results nor a result without its call, and leaves out
// whole turns, oldest first (what it keeps is a suffix of the turns after
// the kept first turn); that it keeps all when all fits, fits the budget,
// and renders O(log turns) times.
func TestFitProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(54, 1))
	for i := range 3000 {
		msgs := conversation(r)
		full, _ := measure(msgs)
		budget := 20 + r.IntN(len(full)+40)
		limit := budget + r.IntN(2)*r.IntN(60) // the window, past the target budget
		p := []Policy{TruncateMiddle, Rolling}[i%2]
		renders := 0
		f, err := Fit(msgs, p, budget, limit, func(m []chat.Message) ([]int32, error) { renders++; return measure(m) })
		name := fmt.Sprintf("case %d (%s, budget %d of %d)", i, p, budget, len(full))
		var tl *TooLongError
		if errors.As(err, &tl) {
			if tl.PromptTokens <= limit || tl.Kept == "" {
				t.Fatalf("%s: %v: a too-long error for a prompt that fits, or naming nothing", name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if maxRenders := 3 + bits.Len(uint(len(msgs))); renders > maxRenders {
			t.Errorf("%s: %d renders, want at most %d", name, renders, maxRenders)
		}
		if len(f.Prompt) > limit || (len(full) <= budget) != (f.Dropped == 0) && len(f.Prompt) <= budget {
			t.Fatalf("%s: kept %d tokens with %d messages dropped", name, len(f.Prompt), f.Dropped)
		}
		if len(f.Prompt) > budget { // over the target: only when nothing more may go
			if _, err := Fit(msgs, p, budget, budget, measure); !errors.As(err, &tl) {
				t.Fatalf("%s: %d tokens over the budget, but a fit within it exists (%v)", name, len(f.Prompt), err)
			}
		}
		checkKept(t, name, msgs, keptIndexes(t, msgs, f.Messages), p)
	}
}

// keptIndexes maps kept (a subsequence of msgs, by identity of position)
// back to msgs' indexes.
func keptIndexes(t *testing.T, msgs, kept []chat.Message) []bool {
	in := make([]bool, len(msgs))
	j := 0
	for i := range msgs {
		if j < len(kept) && sameMessage(msgs[i], kept[j]) {
			in[i] = true
			j++
		}
	}
	if j != len(kept) {
		t.Fatalf("the kept messages are not a subsequence of the conversation")
	}
	return in
}

func sameMessage(a, b chat.Message) bool {
	return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID && slices.EqualFunc(a.ToolCalls, b.ToolCalls,
		func(x, y chat.ToolCall) bool { return x.ID == y.ID })
}

func checkKept(t *testing.T, name string, msgs []chat.Message, in []bool, p Policy) {
	t.Helper()
	users := []int{}
	for i, m := range msgs {
		switch {
		case System(m) && !in[i]:
			t.Fatalf("%s: system message %d dropped", name, i)
		case m.Role == "user":
			users = append(users, i)
		}
	}
	if len(users) == 0 {
		return
	}
	lastUser, firstUser := users[len(users)-1], users[0]
	for i := lastUser; i < len(msgs); i++ {
		if !in[i] {
			t.Fatalf("%s: message %d of the last user turn dropped", name, i)
		}
	}
	// With truncate_middle the first user turn is kept (up to the second
	// user message, or further when a tool result pairs it with a call).
	keepTo := 0
	if p == TruncateMiddle {
		keepTo = len(msgs)
		if len(users) > 1 {
			keepTo = users[1]
		}
		for i := firstUser; i < keepTo; i++ {
			if !in[i] && !System(msgs[i]) {
				t.Fatalf("%s: message %d of the first user turn dropped", name, i)
			}
		}
	}
	// Oldest first and whole turns: the dropped messages are one run
	// (system messages aside), from the first message not kept by the
	// policy (rolling) or a user message after the first turn
	// (truncate_middle), up to a user message.
	var dropped []int
	for i, m := range msgs {
		if !in[i] {
			dropped = append(dropped, i)
		} else if len(dropped) > 0 && !System(m) && dropped[len(dropped)-1] != -1 {
			dropped = append(dropped, -1) // the run ended
		}
	}
	if len(dropped) == 0 {
		checkPairs(t, name, msgs, in)
		return
	}
	if i := slices.Index(dropped, -1); i >= 0 && i < len(dropped)-1 {
		t.Fatalf("%s: dropped messages %v are not one run", name, dropped)
	}
	start := dropped[0]
	switch {
	case p == Rolling && slices.ContainsFunc(msgs[:start], func(m chat.Message) bool { return !System(m) }):
		t.Fatalf("%s: rolling dropped from message %d, not the oldest", name, start)
	case p == TruncateMiddle && (start < keepTo || msgs[start].Role != "user"):
		t.Fatalf("%s: truncate_middle dropped from message %d, not a user turn after the first (ends %d)", name, start, keepTo)
	}
	for i := start; i < len(msgs); i++ {
		if in[i] && !System(msgs[i]) {
			if msgs[i].Role != "user" {
				t.Fatalf("%s: the kept messages after the dropped ones start with %s (message %d), not a user turn", name, msgs[i].Role, i)
			}
			break
		}
	}
	checkPairs(t, name, msgs, in)
}

// checkPairs checks that each kept call has all its results kept and each
// kept result its call.
func checkPairs(t *testing.T, name string, msgs []chat.Message, in []bool) {
	t.Helper()
	for i, m := range msgs {
		if m.Role != "tool" {
			continue
		}
		c := -1
		for j := i - 1; j >= 0 && c < 0; j-- {
			for _, tc := range msgs[j].ToolCalls {
				if m.ToolCallID == "" || tc.ID == m.ToolCallID {
					c = j
				}
			}
		}
		if c >= 0 && in[c] != in[i] {
			t.Fatalf("%s: tool result %d kept=%v but its call %d kept=%v", name, i, in[i], c, in[c])
		}
	}
}

// TestFitError checks the error policy: the whole prompt, measured once,
// whatever its length (the engine refuses it).
func TestFitError(t *testing.T) {
	msgs := []chat.Message{{Role: "user", Content: strings.Repeat("x", 4000)}, {Role: "assistant", Content: "a"}, {Role: "user", Content: "b"}}
	f, err := Fit(msgs, Error, 10, 10, measure)
	if err != nil || f.Dropped != 0 || len(f.Messages) != 3 || len(f.Prompt) < 1000 {
		t.Fatalf("Fit(error) = %d messages, %d dropped, %d tokens, %v; want all", len(f.Messages), f.Dropped, len(f.Prompt), err)
	}
}

// TestFitLengthError checks that a render past the byte bound reads as
// "does not fit" and a shorter candidate is tried.
func TestFitLengthError(t *testing.T) {
	msgs := []chat.Message{{Role: "system", Content: "s"}, {Role: "user", Content: strings.Repeat("x", 4000)},
		{Role: "assistant", Content: "a"}, {Role: "user", Content: "b"}}
	enc := func(m []chat.Message) ([]int32, error) {
		p, _ := measure(m)
		if len(p) > 500 {
			return nil, &chat.LengthError{MaxBytes: 2000}
		}
		return p, nil
	}
	f, err := Fit(msgs, Rolling, 100, 100, enc)
	if err != nil || f.Dropped != 2 || f.Messages[0].Content != "s" || f.Messages[1].Content != "b" {
		t.Fatalf("Fit = %+v, %v; want the system message and the last user turn", f.Messages, err)
	}
	if _, err := Fit(msgs, TruncateMiddle, 100, 100, enc); !errors.As(err, new(*TooLongError)) {
		t.Fatalf("truncate_middle keeping a too-long first turn: %v, want a TooLongError", err)
	}
}

func TestFitTokens(t *testing.T) {
	prompt := []int32{1, 10, 11, 12, 13, 14, 15, 16, 17, 18}
	tests := []struct {
		keep, budget int
		want         []int32
		dropped      int
		tooLong      bool
	}{
		{keep: 1, budget: 20, want: prompt},
		{keep: 1, budget: 4, want: []int32{1, 16, 17, 18}, dropped: 6},
		{keep: 3, budget: 5, want: []int32{1, 10, 11, 17, 18}, dropped: 5},
		{keep: 5, budget: 5, tooLong: true},
	}
	for _, tt := range tests {
		f, err := FitTokens(prompt, tt.keep, tt.budget)
		if tt.tooLong {
			if !errors.As(err, new(*TooLongError)) {
				t.Errorf("keep %d budget %d: %v, want a TooLongError", tt.keep, tt.budget, err)
			}
			continue
		}
		if err != nil || !slices.Equal(f.Prompt, tt.want) || f.Dropped != tt.dropped {
			t.Errorf("keep %d budget %d: %v dropped %d (%v), want %v dropped %d", tt.keep, tt.budget, f.Prompt, f.Dropped, err, tt.want, tt.dropped)
		}
	}
}

func TestReplyRoom(t *testing.T) {
	for _, tt := range []struct{ maxTokens, ctx, want int }{
		{0, 512, 128}, {50, 512, 50}, {4096, 512, 256}, {0, 2, 1},
	} {
		if got := ReplyRoom(tt.maxTokens, tt.ctx); got != tt.want {
			t.Errorf("ReplyRoom(%d, %d) = %d, want %d", tt.maxTokens, tt.ctx, got, tt.want)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Policy
		bad  bool
	}{{"", Rolling, false}, {"error", Error, false}, {"truncate_middle", TruncateMiddle, false}, {"rolling", Rolling, false}, {"middle", "", true}} {
		got, err := Parse(tt.in, Rolling)
		if got != tt.want || (err != nil) != tt.bad {
			t.Errorf("Parse(%q) = %q, %v", tt.in, got, err)
		}
	}
}

// TestFitCost: a 5,000-turn history whose tool results name no call of
// theirs (each joined with the nearest call before it) is fitted in one
// pass over its turns and a binary search's renders: well under 0.2 s of
// CPU, where a turn lookup per result is quadratic.
func TestFitCost(t *testing.T) {
	var msgs []chat.Message
	for i := range 5000 {
		msgs = append(msgs, chat.Message{Role: "user", Content: fmt.Sprint("q", i)},
			chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: fmt.Sprint("c", i), Name: "f"}}},
			chat.Message{Role: "tool", Content: "r", ToolCallID: "unknown"})
	}
	renders := 0
	var f Fitted
	var err error
	cost := costtest.Measure(func() {
		f, err = Fit(msgs, Rolling, 500, 500, func(m []chat.Message) ([]int32, error) { renders++; return measure(m) })
	})
	if err != nil || f.Dropped%3 != 0 || f.Messages[0].Role != "user" {
		t.Fatalf("Fit: %d dropped, %v", f.Dropped, err)
	}
	costtest.Within(t, "Fit over 5,000 tool turns", cost, 200*time.Millisecond, 200<<20)
	if renders > 16 {
		t.Errorf("%d renders, want O(log 5000)", renders)
	}
}
