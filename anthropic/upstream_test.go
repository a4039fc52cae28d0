package anthropic

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/upstream/chatwire/chatwiretest"
)

// TestToOpenAI: what a Messages request becomes upstream.
func TestToOpenAI(t *testing.T) {
	const hi = `"messages":[{"role":"user","content":"hi"}]`
	tools := `"tools":[{"name":"get","description":"Weather.","input_schema":{"type":"object"}}]`
	cases := []struct {
		name, body string
		want       []string // in the OpenAI request
		not        []string // not in it
		err        string
	}{
		{"system blocks", `{"model":"m","max_tokens":8,"system":[{"type":"text","text":"x-anthropic-billing-header: cc=1;"},{"type":"text","text":"A."},{"type":"text","text":"B."}],` + hi + `}`,
			[]string{`{"model":"m","messages":[{"role":"system","content":"A.\n\nB."},{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":8}`},
			[]string{"billing", "tools"}, ""},
		{"system string and sampling", `{"model":"m","max_tokens":8,"system":"S.","temperature":0.5,"top_p":0.9,"top_k":40,"stop_sequences":["END"],` + hi + `}`,
			[]string{`{"role":"system","content":"S."}`, `"temperature":0.5,"top_p":0.9,"max_tokens":8,"stop":["END"]`}, []string{"top_k", "40"}, ""},
		{"tool round trip", `{"model":"m","max_tokens":8,` + tools + `,"messages":[{"role":"user","content":"weather?"},
			{"role":"assistant","content":[{"type":"text","text":"Looking."},{"type":"tool_use","id":"toolu_1","name":"get","input":{"city":"Oslo"}},{"type":"tool_use","id":"toolu_2","name":"get","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"5C"},{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"no"}],"is_error":true}]}]}`,
			[]string{`{"role":"assistant","content":"Looking.","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get","arguments":"{\"city\":\"Oslo\"}"}},` +
				`{"id":"toolu_2","type":"function","function":{"name":"get","arguments":"{}"}}]}`,
				`{"role":"tool","content":"5C","tool_call_id":"toolu_1"},{"role":"tool","content":"Error: no","tool_call_id":"toolu_2"}`,
				`"tools":[{"type":"function","function":{"name":"get","description":"Weather.","parameters":{"type":"object"}}}],"tool_choice":"auto"`}, nil, ""},
		{"tool_choice any", `{"model":"m","max_tokens":8,` + tools + `,"tool_choice":{"type":"any","disable_parallel_tool_use":true},` + hi + `}`,
			[]string{`"tool_choice":"required","parallel_tool_calls":false`}, nil, ""},
		{"tool_choice tool", `{"model":"m","max_tokens":8,` + tools + `,"tool_choice":{"type":"tool","name":"get"},` + hi + `}`,
			[]string{`"tool_choice":{"function":{"name":"get"},"type":"function"}`}, nil, ""},
		{"tool_choice none", `{"model":"m","max_tokens":8,` + tools + `,"tool_choice":{"type":"none"},` + hi + `}`,
			[]string{`"tool_choice":"none"`}, nil, ""},
		{"json outputs", `{"model":"m","max_tokens":8,"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}},` + hi + `}`,
			[]string{`"response_format":{"json_schema":{"name":"output","schema":{"type":"object"}},"type":"json_schema"}`}, nil, ""},
		{"no max_tokens", `{"model":"m",` + hi + `}`, nil, nil, "Field required"},
		{"temperature range", `{"model":"m","max_tokens":8,"temperature":1.5,` + hi + `}`, nil, nil, "temperature must be in [0, 1]"},
		{"unknown tool", `{"model":"m","max_tokens":8,` + tools + `,"tool_choice":{"type":"tool","name":"nope"},` + hi + `}`, nil, nil, "not in tools"},
		{"server tool", `{"model":"m","max_tokens":8,"tools":[{"type":"web_search_20250305","name":"web_search"}],` + hi + `}`, nil, nil, "not supported"},
		{"image", `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`, nil, nil, "image content blocks"},
		{"prefill", `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Sure:"}]}`, nil, nil, "prefill"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := ToOpenAI(decode(t, c.body))
			chatwiretest.Check(t, out, err, c.err, c.want, c.not)
		})
	}
}

// TestRelayStopReasons: the upstream's finish_reason (and vLLM's
// stop_reason) as Anthropic's stop_reason, and its usage.
func TestRelayStopReasons(t *testing.T) {
	cases := []struct {
		name   string
		stops  []string
		chunks []string
		reason string
		seq    string
	}{
		{"end_turn", nil, []string{`{"choices":[{"delta":{"content":"Hi."},"finish_reason":"stop"}]}`}, StopEndTurn, ""},
		{"max_tokens", nil, []string{`{"choices":[{"delta":{"content":"Hi"},"finish_reason":"length"}]}`}, StopMaxTokens, ""},
		{"stop_sequence", []string{"END", "\n\n"}, []string{`{"choices":[{"delta":{"content":"Hi"},"finish_reason":"stop","stop_reason":"\n\n"}]}`}, StopSequence, "\n\n"},
		{"eos, not a stop sequence", []string{"END"}, []string{`{"choices":[{"delta":{"content":"Hi"},"finish_reason":"stop","stop_reason":128009}]}`}, StopEndTurn, ""},
		{"tool_use", nil, []string{`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}]}`}, StopToolUse, ""},
		{"refusal", nil, []string{`{"choices":[{"delta":{},"finish_reason":"content_filter"}]}`}, StopRefusal, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &Relay{Model: "big", ID: "msg_1", Stops: c.stops}
			for _, ch := range append(c.chunks, `{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}`) {
				if _, err := r.Chunk([]byte(ch)); err != nil {
					t.Fatal(err)
				}
			}
			m := r.Message()
			seq := ""
			if m.StopSequence != nil {
				seq = *m.StopSequence
			}
			if *m.StopReason != c.reason || seq != c.seq {
				t.Errorf("stop_reason %s %q, want %s %q", *m.StopReason, seq, c.reason, c.seq)
			}
			if want := (Usage{InputTokens: 8, OutputTokens: 3, CacheReadInputTokens: 4}); m.Usage != want {
				t.Errorf("usage %+v, want %+v", m.Usage, want)
			}
			end := r.End()
			if d := end[len(end)-2]; d.Type != "message_delta" || d.Delta.(*MessageDelta).StopReason != c.reason || *d.Usage != m.Usage {
				t.Errorf("message_delta %+v", d)
			}
		})
	}
}

// TestRelayEvents: the event sequence of a reply of text and two tool
// calls, one without arguments.
func TestRelayEvents(t *testing.T) {
	r := &Relay{Model: "big", ID: "msg_1"}
	var evs []Event
	for _, c := range []string{
		`{"choices":[{"delta":{"role":"assistant"}}]}`,
		`{"choices":[{"delta":{"content":"Ok"}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"f","arguments":"{\"x\":"}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"name":"g"}}]},"finish_reason":"tool_calls"}]}`,
	} {
		e, err := r.Chunk([]byte(c))
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e...)
	}
	evs = append(evs, r.End()...)
	var got []string
	for _, e := range evs {
		b, _ := json.Marshal(e)
		got = append(got, string(b))
	}
	want := []string{
		`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"big","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}}`,
		`{"type":"ping"}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Ok"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_a","name":"f","input":{}}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"x\":"}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"1}"}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"` + r.ids[1] + `","name":"g","input":{}}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{}"}}`,
		`{"type":"content_block_stop","index":2}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`,
		`{"type":"message_stop"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.HasPrefix(r.ids[1], "toolu_") {
		t.Errorf("made-up tool_use id %q", r.ids[1])
	}
	if b, _ := json.Marshal(r.Message().Content); !strings.Contains(string(b), `{"type":"tool_use","id":"toolu_a","name":"f","input":{"x":1}}`) {
		t.Errorf("content %s", b)
	}
	// Arguments of call 0 again, after call 1 began: no block to add them to.
	if _, err := r.Chunk([]byte(`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"x"}}]}}]}`)); err == nil {
		t.Error("interleaved tool-call arguments are not an error")
	}
	if _, err := r.Chunk([]byte(`{"error":{"message":"boom"}}`)); err == nil {
		t.Error("an error chunk is not an error")
	}
	if _, err := r.Chunk([]byte(`not json`)); err == nil {
		t.Error("a chunk that is not JSON is not an error")
	}
}

// TestRelayEmpty: an upstream that ends at once still gives a whole
// stream and an empty message.
func TestRelayEmpty(t *testing.T) {
	r := &Relay{Model: "big", ID: "msg_1"}
	evs := r.End()
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	if got := strings.Join(types, " "); got != "message_start ping message_delta message_stop" {
		t.Errorf("events %s", got)
	}
	if m := r.Message(); len(m.Content) != 0 || *m.StopReason != StopEndTurn {
		t.Errorf("message %+v", m)
	}
}

// BenchmarkRelayChunk is the conversion's cost per streamed token: one
// upstream chunk of text read and turned into its content_block_delta.
func BenchmarkRelayChunk(b *testing.B) {
	chunk := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" sea"},"logprobs":null,"finish_reason":null}]}`)
	r := &Relay{Model: "big", ID: "msg_1"}
	b.ReportAllocs()
	for b.Loop() {
		evs, err := r.Chunk(chunk)
		if err != nil || len(evs) == 0 {
			b.Fatal(err)
		}
		if _, err := json.Marshal(evs[len(evs)-1]); err != nil {
			b.Fatal(err)
		}
	}
}
