package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestBenchFlags checks the argument errors that stop bench before it loads anything.
func TestBenchFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no model", nil, 2, "--model"},
		{"unknown phase", []string{"--bundle", "x", "--phases", "host,warp"}, 2, `unknown phase "warp"`},
		{"extra argument", []string{"--bundle", "x", "extra"}, 2, `unexpected argument "extra"`},
		{"bad flag", []string{"--nope"}, 2, "flag provided but not defined"},
		{"help", []string{"--help"}, 0, "Usage: hexserve bench"},
		{"missing config", []string{"--config", "/nonexistent/bench.yaml"}, 2, "bench.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := benchMain(tc.args, &out, &errb); code != tc.code || !strings.Contains(out.String()+errb.String(), tc.msg) {
				t.Errorf("code %d, stdout %q, stderr %q; want %d and %q", code, out.String(), errb.String(), tc.code, tc.msg)
			}
		})
	}
}
