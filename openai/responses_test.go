package openai

import (
	"encoding/json"
	"github.com/hexserve/hexserve/apiconv"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/internal/costtest"
)

// TestResponseRendersLikeChat checks that a Responses conversation is
// rendered through the same template as the equivalent chat request, token
// for token (instructions and developer messages as system, function calls
// as assistant tool calls, outputs as tool messages, function tools as the
// template's tool objects).
func TestResponseRendersLikeChat(t *testing.T) {
	p := apiconv.Params{Tokenizer: testTok(t), Date: "26 Jul 2024", ContextLen: 4096}
	for _, tc := range []struct{ name, resp, chat string }{
		{"string input",
			`{"input":"Hi"}`,
			`{"messages":[{"role":"user","content":"Hi"}]}`},
		{"instructions and parts",
			`{"instructions":"Be brief.","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}]}`,
			`{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"a\nb"}]}`},
		{"developer is system",
			`{"input":[{"role":"developer","content":"Rules."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"},{"role":"user","content":"Bye"}]}`,
			`{"messages":[{"role":"system","content":"Rules."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"},{"role":"user","content":"Bye"}]}`},
		{"function call round trip",
			`{"tools":[{"type":"function","name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":true}],
			  "input":[{"role":"user","content":"Weather?"},{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
			           {"type":"function_call_output","call_id":"call_1","output":"18C"}]}`,
			`{"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
			  "messages":[{"role":"user","content":"Weather?"},{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
			              {"role":"tool","tool_call_id":"call_1","content":"18C"}]}`},
		{"tool_choice none hides the tools",
			`{"tool_choice":"none","tools":[{"type":"function","name":"f"}],"input":"Hi"}`,
			`{"messages":[{"role":"user","content":"Hi"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rr ResponseRequest
			var cr ChatCompletionRequest
			if err := json.Unmarshal([]byte(tc.resp), &rr); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.chat), &cr); err != nil {
				t.Fatal(err)
			}
			rg, err := FromResponseRequest(&rr, nil, p, "resp_x", 0)
			if err != nil {
				t.Fatal(err)
			}
			cg, err := FromChatCompletionRequest(&cr, p)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rg.Request.Prompt, cg.Request.Prompt) {
				t.Fatalf("responses prompt\n%q\nchat prompt\n%q", p.Tokenizer.Decode(rg.Request.Prompt, false), p.Tokenizer.Decode(cg.Request.Prompt, false))
			}
			if !slices.Equal(rg.Tools, cg.Tools) {
				t.Fatalf("tools %v, chat %v", rg.Tools, cg.Tools)
			}
		})
	}
}

// TestResponseContinuation checks that a continuation renders the stored
// conversation (without the previous instructions) before the new input,
// and that auto truncation keeps the instructions and the first and last
// user turns.
func TestResponseContinuation(t *testing.T) {
	p := apiconv.Params{Tokenizer: testTok(t), Date: "26 Jul 2024", ContextLen: 4096}
	first := &ResponseRequest{Instructions: ptr("Old rules."), Input: ResponseInput{Set: true, Items: []Item{userItem("one")}}}
	g, err := FromResponseRequest(first, nil, p, "resp_1", 0)
	if err != nil {
		t.Fatal(err)
	}
	g.Response.Output = []Item{messageItem("msg_a", "reply one", "completed")}
	prev := &StoredResponse{Response: g.Response, Input: g.Input, History: g.History}

	next := &ResponseRequest{Input: ResponseInput{Set: true, Items: []Item{userItem("two")}}}
	g2, err := FromResponseRequest(next, prev, p, "resp_2", 0)
	if err != nil {
		t.Fatal(err)
	}
	text := p.Tokenizer.Decode(g2.Request.Prompt, false)
	if strings.Contains(text, "Old rules.") || !strings.Contains(text, "one") || !strings.Contains(text, "reply one") ||
		strings.Index(text, "reply one") > strings.Index(text, "two") {
		t.Fatalf("continuation prompt %q", text)
	}
	if len(g2.History) != 2 || len(g2.Input) != 1 {
		t.Fatalf("history %d items, input %d", len(g2.History), len(g2.Input))
	}

	// Auto truncation: a small context drops the middle turns.
	items := []Item{userItem("FIRST")}
	for range 20 {
		items = append(items, userItem("more"), messageItem("", strings.Repeat("filler ", 20), "completed"))
	}
	items = append(items, userItem("LAST"))
	long := &ResponseRequest{Instructions: ptr("RULES"), Truncation: ptr("auto"), Input: ResponseInput{Set: true, Items: items}}
	p.ContextLen = 400
	g3, err := FromResponseRequest(long, nil, p, "resp_3", 0)
	if err != nil {
		t.Fatal(err)
	}
	text = p.Tokenizer.Decode(g3.Request.Prompt, false)
	if len(g3.Request.Prompt) >= 400 || !strings.Contains(text, "RULES") || !strings.Contains(text, "FIRST") || !strings.Contains(text, "LAST") {
		t.Fatalf("truncated prompt (%d tokens) %q", len(g3.Request.Prompt), text)
	}
	long.Truncation = ptr("disabled")
	if _, err := FromResponseRequest(long, nil, p, "resp_4", 0); err == nil {
		t.Fatal("disabled truncation accepted an overlong conversation")
	}
}

func ptr[T any](v T) *T { return &v }

func userItem(text string) Item {
	return Item{Role: "user", Content: ItemContent{{Type: "input_text", Text: text}}}
}

// TestTruncationOnePass: truncation "auto" over 4,500 empty turns (issue
// #32's F6: 4.9 s of re-rendering, once per dropped item) costs at most
// 0.2 s of CPU, and keeps exactly as many turns as the one-at-a-time cut,
// leaving a quarter of the window for the reply (overflow.ReplyRoom).
func TestTruncationOnePass(t *testing.T) {
	p := apiconv.Params{Tokenizer: testTok(t), Date: "26 Jul 2024", ContextLen: 512}
	build := func(n int) *ResponseRequest {
		items := []Item{userItem("FIRST")}
		for range n {
			items = append(items, userItem(""), messageItem("", "", "completed"))
		}
		items = append(items, userItem("LAST"))
		return &ResponseRequest{Truncation: ptr("auto"), Input: ResponseInput{Set: true, Items: items}}
	}
	var g *ResponseGeneration
	var err error
	cost := costtest.Measure(func() { g, err = FromResponseRequest(build(4500), nil, p, "resp_t", 0) })
	if err != nil {
		t.Fatal(err)
	}
	costtest.Within(t, "truncation auto over 4,500 turns", cost, 200*time.Millisecond, 100<<20)
	if n := len(g.Request.Prompt); n > p.ContextLen*3/4 {
		t.Fatalf("prompt of %d tokens for a %d-token context", n, p.ContextLen)
	}
	// The cut is the smallest: the same prompt as dropping one item at a time.
	for _, n := range []int{0, 3, 150} {
		r := build(n)
		got, err := FromResponseRequest(r, nil, p, "resp_u", 0)
		if err != nil {
			t.Fatal(err)
		}
		items := r.Input.Items
		var want []int32
		for d := 0; ; d++ {
			msgs, _ := itemMessages(append(items[:1:1], items[1+2*d:]...))
			want, _ = apiconv.EncodeChat(p.Tokenizer, msgs, chat.Options{AddGenerationPrompt: true, DateString: p.Date}, "")
			if len(want) <= p.ContextLen*3/4 {
				break
			}
		}
		if !slices.Equal(got.Request.Prompt, want) {
			t.Errorf("%d items: prompt of %d tokens, the one-at-a-time cut gives %d", n, len(got.Request.Prompt), len(want))
		}
	}
}

// TestValidateStored: a stored response file is checked as if a client had
// sent it (issue #32's F9: `data: 5` or a null response gave 500s, a
// function_call without arguments panicked on continuation).
func TestValidateStored(t *testing.T) {
	args := `{"x":1}`
	good, _ := json.Marshal(StoredResponse{Response: &Response{ID: "resp_a", Output: []Item{
		{Type: "function_call", ID: "fc_1", CallID: "c1", Name: "f", Arguments: &args, Status: "completed"}}},
		Input: []Item{userItem("hi")}})
	if err := ValidateStored("resp_a", good); err != nil {
		t.Fatalf("a stored response refused: %v", err)
	}
	for name, data := range map[string]string{
		"a number":          `5`,
		"null response":     `{"response":null}`,
		"another id":        string(good),
		"call without args": `{"response":{"id":"resp_b","output":[{"type":"function_call","call_id":"c","name":"f"}]}}`,
		"bad role":          `{"response":{"id":"resp_b","output":[]},"input":[{"type":"message","role":"root","content":[]}]}`,
	} {
		id := "resp_b"
		if name == "another id" {
			id = "resp_other"
		}
		if err := ValidateStored(id, []byte(data)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
