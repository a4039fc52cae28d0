// Package chatwiretest checks, in the anthropic and ollama tests, the
// OpenAI chat request (chatwire's JSON) a request became for an upstream:
// the refusal, or the JSON text it must and must not hold.
package chatwiretest

import (
	"strings"
	"testing"
)

// Check fails t unless err holds wantErr (when it is not "") or else out
// holds each of want and none of not.
func Check(t *testing.T, out []byte, err error, wantErr string, want, not []string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err %v, want %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("%s\nlacks %s", out, w)
		}
	}
	for _, n := range not {
		if strings.Contains(string(out), n) {
			t.Errorf("%s\nholds %s", out, n)
		}
	}
}
