package chatwire

import (
	"errors"
	"strings"
	"testing"
)

// TestChunkReader: the first choice's text and calls accumulate, usage and
// the matched stop are kept, error chunks are *ChunkError.
func TestChunkReader(t *testing.T) {
	var r ChunkReader
	for _, c := range []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":"He"}},{"index":1,"delta":{"content":"other"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"y","tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{\"a\""}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]},"finish_reason":"stop","stop_reason":"END"}]}`,
		`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}`,
	} {
		if _, err := r.Read([]byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	calls := r.ToolCalls()
	if r.Text() != "Hey" || len(calls) != 1 || calls[0].ID != "call_1" || calls[0].Function.Arguments != `{"a":1}` ||
		r.Finish() != "stop" || r.MatchedStop() != "END" || r.Chunks() != 4 {
		t.Errorf("text %q calls %+v finish %q stop %q chunks %d", r.Text(), calls, r.Finish(), r.MatchedStop(), r.Chunks())
	}
	if u := r.Usage(); u.PromptTokens != 5 || u.CompletionTokens != 3 || u.PromptTokensDetails.CachedTokens != 2 {
		t.Errorf("usage %+v", u)
	}
	var ce *ChunkError
	if _, err := r.Read([]byte(`{"error":{"message":"boom"}}`)); !errors.As(err, &ce) || ce.Message != "boom" {
		t.Errorf("error chunk: %v", err)
	}
	if _, err := r.Read([]byte(`{"choices":`)); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("bad chunk: %v", err)
	}
}
