package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseFlagsInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		json bool
		pos  []string
	}{
		{[]string{"a", "--json"}, true, []string{"a"}},
		{[]string{"--json", "a"}, true, []string{"a"}},
		{[]string{"a", "--arch", "v75", "b", "--json"}, true, []string{"a", "b"}},
		{[]string{"a", "--", "--json"}, false, []string{"a", "--json"}},
		{nil, false, nil},
	} {
		fs := newTestFlags()
		pos, err := parseFlags(fs, tc.args)
		if err != nil || fs.Lookup("json").Value.String() != map[bool]string{true: "true", false: "false"}[tc.json] ||
			strings.Join(pos, " ") != strings.Join(tc.pos, " ") {
			t.Errorf("%q: json=%s pos=%q err=%v; want json=%v pos=%q", tc.args, fs.Lookup("json").Value, pos, err, tc.json, tc.pos)
		}
	}
}

// TestSubcommandArgs: every subcommand accepts its flags before and after
// positional arguments, and names exactly the argument it did not understand;
// the argument errors that stop a subcommand before it loads anything.
func TestSubcommandArgs(t *testing.T) {
	seen := map[string]bool{}
	defer func() {
		for name := range subcommands {
			if !seen[name] {
				t.Errorf("subcommand %q has no case", name)
			}
		}
	}()
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"version extra", []string{"version", "extra"}, 2, `unexpected argument "extra"`},
		{"version help after", []string{"version", "--help"}, 0, ""},
		{"serve extra between flags", []string{"serve", "--queue", "3", "extra", "--addr", "127.0.0.1:1"}, 2, `unexpected argument "extra"`},
		{"serve extra first", []string{"serve", "extra", "--queue", "3"}, 2, `unexpected argument "extra"`},
		{"inspect no path", []string{"inspect", "--json"}, 2, "PATH is required"},
		{"inspect two paths", []string{"inspect", "a", "--json", "b"}, 2, `unexpected argument "b"`},
		{"inspect flag after path", []string{"inspect", "/nonexistent/bundle", "--json"}, 1, "/nonexistent/bundle"},
		{"inspect bad flag after path", []string{"inspect", "x", "--jsn"}, 2, "flag provided but not defined: -jsn"},
		{"mkmodel extra after flags", []string{"mkmodel", "--preset", "tiny", "extra"}, 2, `unexpected argument "extra"`},
		{"mkmodel extra before flags", []string{"mkmodel", "extra", "--preset", "tiny"}, 2, `unexpected argument "extra"`},
		{"bench extra before flags", []string{"bench", "extra", "--bundle", "x"}, 2, `unexpected argument "extra"`},
		{"bench extra argument", []string{"bench", "--bundle", "x", "extra"}, 2, `unexpected argument "extra"`},
		{"bench no model", []string{"bench"}, 2, "--model"},
		{"bench unknown phase", []string{"bench", "--bundle", "x", "--phases", "host,warp"}, 2, `unknown phase "warp"`},
		{"bench bad flag", []string{"bench", "--nope"}, 2, "flag provided but not defined"},
		{"bench help", []string{"bench", "--help"}, 0, "Usage: hexserve bench"},
		{"bench quick and full", []string{"bench", "--bundle", "x", "--quick", "--full"}, 2, "exclude each other"},
		{"bench missing config", []string{"bench", "--config", "/nonexistent/bench.yaml"}, 2, "bench.yaml"},
	} {
		seen[tc.args[0]] = true
		t.Run(tc.name, func(t *testing.T) {
			if tc.args[0] == "mkmodel" && !mkmodelBuilt {
				t.Skip("built with -tags nomkmodel: mkmodel's arguments are not parsed")
			}
			code, text := runCaptured(t, tc.args)
			if code != tc.code || !strings.Contains(text, tc.msg) {
				t.Errorf("exit %d, output %q; want %d and %q", code, text, tc.code, tc.msg)
			}
		})
	}
}

// TestInspectJSONAfterPath runs `hexserve inspect BUNDLE --json` on a fresh
// tiny bundle through hostsim: the flag after the path must take effect.
func TestInspectJSONAfterPath(t *testing.T) {
	sim := hostsimLibDir(t)
	out, _ := tinyBundle(t)
	var stdout, stderr bytes.Buffer
	code := inspect([]string{out, "--json", "--backend", filepath.Join(sim, "libQnnHtp.so"), "--system", filepath.Join(sim, "libQnnSystem.so")}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, &stderr)
	}
	var v any
	if err := json.Unmarshal(stdout.Bytes(), &v); err != nil {
		t.Fatalf("output is not JSON (%v): %.200s", err, &stdout)
	}
}

func newTestFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Bool("json", false, "")
	fs.String("arch", "", "")
	return fs
}

// runCaptured runs a subcommand with its output captured and returns the exit
// code and the output (stdout, then stderr).
func runCaptured(t *testing.T, args []string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	var code int
	switch cmd := subcommands[args[0]]; {
	case args[0] == "serve": // the arguments alone, not a server
		cfg, c := serveConfig(args[1:], &out, &errb, func(string) string { return "" })
		if cfg != nil {
			t.Fatalf("serve %q parsed", args[1:])
		}
		code = c
	case cmd != nil:
		code = cmd(args[1:], &out, &errb)
	default:
		t.Fatalf("no subcommand %q", args[0])
	}
	return code, out.String() + errb.String()
}
