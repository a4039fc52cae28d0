package openai

import (
	"encoding/json"
	"github.com/hexserve/hexserve/apiconv"
	"strings"
	"testing"
)

// TestCacheKey: prompt_cache_key, else user, becomes the KV store's hint on
// both endpoints; a long one is hashed.
func TestCacheKey(t *testing.T) {
	p := apiconv.Params{Tokenizer: testTok(t)}
	long := strings.Repeat("k", 100)
	tests := []struct {
		name, fields, want string
	}{
		{"none", ``, ""},
		{"prompt_cache_key", `,"prompt_cache_key":"agent-7"`, "agent-7"},
		{"user", `,"user":"u1"`, "u1"},
		{"prompt_cache_key wins", `,"user":"u1","prompt_cache_key":"agent-7"`, "agent-7"},
		{"long", `,"prompt_cache_key":"` + long + `"`, "sha256:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cr ChatCompletionRequest
			if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"hi"}]`+tc.fields+`}`), &cr); err != nil {
				t.Fatal(err)
			}
			var pr CompletionRequest
			if err := json.Unmarshal([]byte(`{"prompt":[5,6]`+tc.fields+`}`), &pr); err != nil {
				t.Fatal(err)
			}
			gc, err := FromChatCompletionRequest(&cr, p)
			if err != nil {
				t.Fatal(err)
			}
			gp, err := FromCompletionRequest(&pr, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, got := range []string{gc.Request.CacheKey, gp.Request.CacheKey} {
				if tc.want == "sha256:" {
					if !strings.HasPrefix(got, tc.want) || len(got) > 64 {
						t.Errorf("key %q, want a short hash", got)
					}
				} else if got != tc.want {
					t.Errorf("key %q, want %q", got, tc.want)
				}
			}
		})
	}
}
