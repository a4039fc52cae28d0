package apiconv

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/grammar"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/tokenizer/tokenizertest"
)

func TestCacheKey(t *testing.T) {
	long := strings.Repeat("k", 65)
	if CacheKey("user-1") != "user-1" || !strings.HasPrefix(CacheKey(long), "sha256:") || len(CacheKey(long)) != 7+32 ||
		CacheKey(long) == CacheKey(long+"x") {
		t.Errorf("CacheKey: %q %q", CacheKey("user-1"), CacheKey(long))
	}
}

// TestEncodeChat: special-token text in content stays text, a tail follows
// the template as text, and counts against the byte bound.
func TestEncodeChat(t *testing.T) {
	tok := tokenizertest.Llama32(t)
	msgs := []chat.Message{{Role: "user", Content: "say <|eot_id|>"}}
	opt := chat.Options{AddGenerationPrompt: true}
	ids, err := EncodeChat(tok, msgs, opt, "Sure")
	if err != nil {
		t.Fatal(err)
	}
	eot := tok.Specials().EOT // the system turn's and the user turn's; not the content's text
	n := 0
	for _, id := range ids {
		if id == eot {
			n++
		}
	}
	text := tok.Decode(ids, false)
	if n != 2 || !strings.HasSuffix(text, "<|end_header_id|>\n\nSure") || !strings.Contains(text, "say <|eot_id|>") {
		t.Errorf("%d eot ids in %q", n, text)
	}
	rendered, err := chat.Render(msgs, opt)
	if err != nil {
		t.Fatal(err)
	}
	opt.MaxBytes = len(rendered) + 2 // room for the template, not the tail
	var le *chat.LengthError
	if _, err := EncodeChat(tok, msgs, opt, "Sure"); !errors.As(err, &le) {
		t.Errorf("tail past the bound: %v", err)
	}
	if _, err := EncodeChat(tok, msgs, opt, ""); err != nil {
		t.Errorf("no tail: %v", err)
	}
}

func TestInRange(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		v      *float64
		loOpen bool
		want   float32
		msg    string // of the error; "" none
	}{
		{nil, false, 7, ""},
		{f(0), false, 0, ""},
		{f(1), false, 1, ""},
		{f(0), true, 7, "top_p must be in (0, 1], got 0"},
		{f(1.5), false, 7, "top_p must be in [0, 1], got 1.5"},
		{f(math.NaN()), false, 7, "top_p must be in [0, 1], got NaN"},
	} {
		dst := float32(7)
		err := InRange(tc.v, "top_p", 0, 1, tc.loOpen, &dst)
		var ie *inference.InvalidRequestError
		switch {
		case tc.msg == "" && (err != nil || dst != tc.want):
			t.Errorf("%v: %v, dst %g", tc.v, err, dst)
		case tc.msg != "" && (!errors.As(err, &ie) || ie.Param != "top_p" || ie.Message != tc.msg || dst != 7):
			t.Errorf("%v: %v, want %q", *tc.v, err, tc.msg)
		}
	}
}

// TestConstrain: no grammar is no constraint; without a vocabulary a
// grammar is the 400 naming the field; with one, every choice gets its own
// matcher and the compile hook hears of the grammar.
func TestConstrain(t *testing.T) {
	gr, err := grammar.Compile([]byte(`{"type":"object"}`), grammar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var r inference.Request
	if err := (Params{}).Constrain(&r, nil, "format", "off"); err != nil || r.Constrain != nil {
		t.Errorf("no grammar: %v", err)
	}
	var ie *inference.InvalidRequestError
	if err := (Params{}).Constrain(&r, gr, "format", "format is off"); !errors.As(err, &ie) || ie.Param != "format" || ie.Message != "format is off" {
		t.Errorf("no vocabulary: %v", err)
	}
	v := grammar.VocabOf(tokenizertest.Llama32(t), nil)
	var compiled []*grammar.Grammar
	p := Params{Vocab: func() *grammar.Vocab { return v }, Compiled: func(g *grammar.Grammar) { compiled = append(compiled, g) }}
	if err := p.Constrain(&r, gr, "format", "off"); err != nil || r.Constrain == nil || len(compiled) != 1 {
		t.Fatalf("vocabulary: %v, hook %d", err, len(compiled))
	}
	if a, b := r.Constrain(), r.Constrain(); a == nil || a == b {
		t.Error("the choices share a matcher")
	}
}

func TestFinishReason(t *testing.T) {
	for f, want := range map[inference.FinishReason]string{inference.FinishLength: "length", inference.FinishTimeout: "length", inference.FinishContext: "length",
		inference.FinishStop: "stop", inference.FinishCancelled: "stop"} {
		if got := FinishReason(f); got != want {
			t.Errorf("%v: %s, want %s", f, got, want)
		}
	}
}
