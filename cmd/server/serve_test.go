package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/internal/syncbuf"
	"github.com/hexserve/hexserve/internal/testhttp"
	"github.com/hexserve/hexserve/internal/testwait"
	"github.com/hexserve/hexserve/tokenizer"
)

func TestServeConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(file, []byte("server:\n  listen: 127.0.0.1:9999\n  api_keys: [filekey]\nmodel:\n  bundle: /b\nengine:\n  queue_length: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nan := filepath.Join(dir, "nan.yaml")
	if err := os.WriteFile(nan, []byte("model:\n  bundle: /b\nsampling:\n  temperature: .nan\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("server:\n  body_limit: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		env     string
		code    int
		check   func(*config.Config) bool
		wantErr string
	}{
		{"file", []string{"--config", file}, "", 0, func(c *config.Config) bool {
			return c.Server.Listen == "127.0.0.1:9999" && c.Model.Location() == "/b" && c.Engine.QueueLength == 3
		}, ""},
		{"--model replaces model.bundle", []string{"--config", file, "--model", "/m.pte"}, "", 0, func(c *config.Config) bool {
			return c.Model.Location() == "/m.pte" && c.Model.Bundle == ""
		}, ""},
		{"flags override the file", []string{"--config", file, "--addr", "0.0.0.0:1", "--bundle", "/other", "--queue", "5"}, "", 0,
			func(c *config.Config) bool {
				return c.Server.Listen == "0.0.0.0:1" && c.Model.Location() == "/other" && c.Engine.QueueLength == 5
			}, ""},
		{"env keys merge", []string{"--config", file}, "envkey, filekey", 0, func(c *config.Config) bool {
			return strings.Join(c.Server.APIKeys, ",") == "filekey,envkey"
		}, ""},
		{"no config file, flags only", []string{"--bundle", "/b"}, "", 0, func(c *config.Config) bool {
			return c.Server.Listen == "127.0.0.1:8080" && c.Model.Location() == "/b"
		}, ""},
		{"no model", nil, "", 2, nil, "model.path: must be set (or models, or pass --model)"},
		{"bad file", []string{"--config", bad}, "", 2, nil, "config: server.body_limit: must be > 0"},
		{"NaN temperature", []string{"--config", nan}, "", 2, nil, "config: sampling.temperature: must be a finite number"},
		{"missing file", []string{"--config", filepath.Join(dir, "none.yaml")}, "", 2, nil, "no such file"},
		{"bad flag value", []string{"--bundle", "/b", "--queue", "0"}, "", 2, nil, "engine.queue_length"},
		{"bad addr", []string{"--bundle", "/b", "--addr", "nope"}, "", 2, nil, "server.listen"},
		{"unknown flag", []string{"--nope"}, "", 2, nil, "flag provided but not defined"},
		{"extra argument", []string{"--bundle", "/b", "x"}, "", 2, nil, "unexpected argument"},
		{"help", []string{"--help"}, "", 0, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cfg, code := serveConfig(tt.args, &stdout, &stderr, func(k string) string {
				if k == "HEXSERVE_API_KEYS" {
					return tt.env
				}
				return ""
			})
			if code != tt.code || (cfg == nil) != (tt.check == nil) {
				t.Fatalf("code %d cfg %v, want %d; stderr %s", code, cfg, tt.code, &stderr)
			}
			if tt.check != nil && !tt.check(cfg) {
				t.Fatalf("config %+v", cfg)
			}
			if !strings.Contains(stderr.String(), tt.wantErr) {
				t.Fatalf("stderr %q lacks %q", &stderr, tt.wantErr)
			}
			if help := tt.name == "help"; help != strings.Contains(stdout.String(), "Usage: hexserve serve") {
				t.Fatalf("stdout %q: want the usage there for --help only", &stdout)
			}
		})
	}
}

func TestRunDispatch(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "hexserve version") {
		t.Fatalf("help: %d %q", code, &out)
	}
	if code := run([]string{"frobnicate"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown command "frobnicate"`) {
		t.Fatalf("unknown: %d %q", code, &errb)
	}
	out.Reset()
	if code := runVersion(nil, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "hexserve dev (go1.") {
		t.Fatalf("version: %d %q", code, &out)
	}
}

// TestSubcommandHelp: every subcommand answers --help, -h and `hexserve
// help NAME` with its usage on stdout (nothing on stderr) and exit code 0.
func TestSubcommandHelp(t *testing.T) {
	for name := range subcommands {
		for _, args := range [][]string{{name, "--help"}, {name, "-h"}, {"help", name}} {
			var out, errb bytes.Buffer
			if code := run(args, &out, &errb); code != 0 || out.Len() == 0 || errb.Len() != 0 || !strings.Contains(strings.ToLower(out.String()), "usage") {
				t.Errorf("hexserve %s: exit %d, stdout %.60q, stderr %q; want 0 and the usage on stdout", strings.Join(args, " "), code, &out, &errb)
			}
		}
	}
}

// TestCLIConventions: --version and -v print the version; help names its
// command; usage errors exit 2 with the usage on stderr.
func TestCLIConventions(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		code       int
		out, errSW string
	}{
		{[]string{"--version"}, 0, "hexserve dev (go1.", ""},
		{[]string{"-v"}, 0, "hexserve dev (go1.", ""},
		{[]string{"help"}, 0, "hexserve help [command]", ""},
		{[]string{"--help"}, 0, "hexserve help [command]", ""},
		{[]string{"help", "nope"}, 2, "", `unknown command "nope"`},
		{[]string{"help", "serve", "x"}, 2, "", `unexpected argument "x"`},
		{[]string{"--version", "x"}, 2, "", `unexpected argument "x"`},
		{[]string{"serve", "--nope"}, 2, "", "Usage: hexserve serve"},
		{[]string{"inspect", "--nope"}, 2, "", "usage: hexserve inspect"},
		{[]string{"mkmodel", "--nope"}, 2, "", "usage: hexserve mkmodel"},
		{[]string{"bench", "--nope"}, 2, "", "Usage: hexserve bench"},
		{[]string{"version", "--nope"}, 2, "", "Usage: hexserve version"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if code != tc.code || !strings.HasPrefix(out.String(), tc.out) && !strings.Contains(out.String(), tc.out) || !strings.Contains(errb.String(), tc.errSW) {
			t.Errorf("hexserve %s: exit %d, stdout %.80q, stderr %.120q; want %d, %q, %q", strings.Join(tc.args, " "), code, &out, &errb, tc.code, tc.out, tc.errSW)
		}
		if tc.code != 0 && out.Len() != 0 {
			t.Errorf("hexserve %s: a usage error wrote stdout %q", strings.Join(tc.args, " "), &out)
		}
	}
}

func loadTokenizer(t *testing.T) *tokenizer.Tokenizer {
	tok, err := tokenizer.Load("../../testdata/tokenizer/llama3.2/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func get(t *testing.T, url string, hdr ...string) (int, string) {
	t.Helper()
	r := testhttp.Do(t, "GET", url, "", hdr...)
	return r.Status, strings.TrimSpace(string(r.Body))
}

// serve with a fake model: 503 loading while the loader blocks, then ready
// with the derived id, a clean shutdown that closes the model, and a loud
// warning for a non-loopback listener without keys.
func TestServeLifecycle(t *testing.T) {
	tok := loadTokenizer(t)
	model := inferencetest.NewScripted(inference.ModelInfo{Name: "Tiny Llama (test)", BOS: 128000}, []int32{9906})
	release := make(chan struct{})
	load := func(config.Config, zerolog.Logger) (inference.Model, *tokenizer.Tokenizer, *chat.Template, error) {
		<-release
		return model, tok, nil, nil
	}
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Model.Bundle = "fake"
	var logs syncbuf.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, cfg, zerolog.New(&logs), load, func(a string) { addrc <- a })
	}()
	base := "http://" + <-addrc
	if code, body := get(t, base+"/health"); code != 503 || body != `{"status":"loading"}` {
		t.Fatalf("health while loading: %d %s", code, body)
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, _ := get(t, base+"/health")
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never became healthy")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, body := get(t, base+"/v1/models"); code != 200 || !strings.Contains(body, `"id":"tiny-llama-test"`) {
		t.Fatalf("models: %d %s", code, body)
	}
	if code, body := get(t, base+"/", "Accept", "text/html"); code != 200 || !strings.HasPrefix(body, "<!doctype html>") {
		t.Fatalf("chat page on loopback (server.web_ui unset): %d %.80s", code, body)
	}
	if code, body := get(t, base+"/"); code != 200 || body != "Ollama is running" {
		t.Fatalf("/ for a client that is not a browser: %d %.80s", code, body)
	}
	if code, body := get(t, base+"/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") || !strings.Contains(body, "hexserve_http_requests_total") {
		t.Fatalf("metrics: %d", code)
	}
	cancel()
	if err := testwait.Recv(t, done, 10*time.Second, "serve returning after cancel"); err != nil {
		t.Fatal(err)
	}
	if !model.Closed() {
		t.Error("model not closed at shutdown")
	}
	if strings.Contains(logs.String(), "BEYOND LOOPBACK") {
		t.Error("loopback listener warned")
	}
}

func TestServeLoadFailure(t *testing.T) {
	load := func(config.Config, zerolog.Logger) (inference.Model, *tokenizer.Tokenizer, *chat.Template, error) {
		return nil, nil, nil, errors.New("qnn: libQnnHtp.so: cannot open shared object file")
	}
	cfg := config.Default()
	cfg.Server.Listen = "0.0.0.0:0"
	cfg.Model.Bundle = "/nowhere"
	var logs syncbuf.Buffer
	err := serve(context.Background(), cfg, zerolog.New(&logs), load, nil)
	if err == nil || !strings.Contains(err.Error(), "model /nowhere failed to load: qnn: libQnnHtp.so") {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(logs.String(), "BEYOND LOOPBACK WITHOUT API KEYS") {
		t.Errorf("no warning for 0.0.0.0 without keys: %s", logs.String())
	}
}

func TestServeListenError(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := config.Default()
	cfg.Server.Listen = taken.Addr().String()
	cfg.Model.Bundle = fakeBundle(t)
	err = serve(context.Background(), cfg, zerolog.Nop(), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "pick another address with --addr HOST:PORT") {
		t.Fatalf("err = %v, want address already in use and a hint at --addr", err)
	}
}
