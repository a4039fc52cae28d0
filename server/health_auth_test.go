package server_test

import (
	"encoding/json"
	"testing"

	"github.com/hexserve/hexserve/server"
)

// TestHealthWithoutKey (issue #39 finding 9): with API keys set, /health
// without a key (or with a wrong one) says only the status; with a key it
// reports the engine's figures as before. Without keys, everyone sees them.
func TestHealthWithoutKey(t *testing.T) {
	keyed := newRig(t, rigOptions{opts: server.Options{APIKeys: []string{apiKey}}})
	open := newRig(t, rigOptions{})
	cases := []struct {
		name string
		r    *rig
		hdr  []string
		full bool
	}{
		{"no key", keyed, nil, false},
		{"wrong key", keyed, []string{"Authorization", "Bearer nope"}, false},
		{"key", keyed, []string{"Authorization", "Bearer " + apiKey}, true},
		{"x-api-key", keyed, []string{"x-api-key", apiKey}, true},
		{"no keys configured", open, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := tc.r.do(t, "GET", "/health", "", tc.hdr...)
			var body map[string]any
			if err := json.Unmarshal(rep.Body, &body); err != nil || rep.Status != 200 || body["status"] != "ok" {
				t.Fatalf("%d %s", rep.Status, rep.Body)
			}
			_, counters := body["active_sequences"]
			if counters != tc.full || !tc.full && len(body) != 1 {
				t.Errorf("body %s (the engine's figures shown: %v, want %v)", rep.Body, counters, tc.full)
			}
		})
	}
}
