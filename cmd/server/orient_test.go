package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// fakeBundle is a folder that passes checkModelPath (it holds a
// manifest.json), for tests whose loader never reads it.
func fakeBundle(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCheckModelPath: the common mistakes get one clear error each, with
// the exact text users see; real model paths pass.
func TestCheckModelPath(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tok := write("tok/tokenizer.json", `{"model":{"vocab":{}},"added_tokens":[]}`)
	big := write("big.json", `{"schema_version":1,"pad":"`+strings.Repeat("x", 5<<20)+`"}`)
	txt := write("notes.txt", "hello")
	manifest := write("m/manifest.json", `{"schema_version":1}`)
	odd := write("odd/model.json", `{"schema_version":2,"model":{}}`)
	genie := write("g/genie_config.json", `{"dialog":{}}`)
	pte := write("p/m.pte", "\x00\x00\x00\x00ET12rest")
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	arch := filepath.Join(dir, "b")
	os.MkdirAll(filepath.Join(arch, "v79"), 0o755)
	missing := filepath.Join(dir, "nowhere")
	loop := filepath.Join(dir, "loop")
	os.Mkdir(loop, 0o755)
	os.Symlink("v79", filepath.Join(loop, "v79")) // the bundle reader reports the loop

	for _, tc := range []struct {
		path, want string
	}{
		{tok, "model " + tok + ": not a model: want a bundle folder, a manifest, a `.pte` or a Genie bundle (this is a tokenizer: name the folder or manifest beside it)"},
		{big, "model " + big + ": not a model: want a bundle folder, a manifest, a `.pte` or a Genie bundle"},
		{txt, "model " + txt + ": not a model: want a bundle folder, a manifest, a `.pte` or a Genie bundle"},
		{empty, "model " + empty + ": not a model: the folder holds none of manifest.json, an arch folder (v79/, …) with one, a .pte file, " +
			"or a Genie bundle's genie_config.json (want a bundle folder, a manifest, a `.pte` or a Genie bundle)"},
		{missing, "model " + missing + ": no such file or folder (want a bundle folder, a manifest, a `.pte` or a Genie bundle)"},
		{manifest, ""},
		{filepath.Dir(manifest), ""},
		{odd, ""}, // a manifest of another schema: the bundle reader says what is wrong
		{genie, ""},
		{filepath.Dir(genie), ""},
		{pte, ""},
		{filepath.Dir(pte), ""},
		{arch, ""},
		{loop, ""},
		{"/dev/null", ""}, // not opened here: the bundle reader says it is a device
	} {
		err := checkModelPath(tc.path)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", filepath.Base(tc.path), got, tc.want)
		}
	}
}

// TestServeMissingModelOneLine: a missing model path stops serve before it
// listens or logs anything: the one line is runServe's error.
func TestServeMissingModelOneLine(t *testing.T) {
	var logs bytes.Buffer
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Model.Bundle = filepath.Join(t.TempDir(), "nowhere")
	err := serve(context.Background(), cfg, zerolog.New(&logs), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "no such file or folder") {
		t.Fatalf("err = %v", err)
	}
	if logs.Len() != 0 {
		t.Errorf("logged before the error:\n%s", &logs)
	}
}

// TestGeneratedMarker: a model mkmodel wrote says so in its own files (the
// manifest's note, the .pte's metadata), whatever its path.
func TestGeneratedMarker(t *testing.T) {
	if generatedKey != tinyllama.GeneratedKey {
		t.Fatalf("generatedKey %q, the writers' %q", generatedKey, tinyllama.GeneratedKey)
	}
	dir, _ := tinyBundle(t)
	pteDir := filepath.Join(t.TempDir(), "renamed")
	if code, _, errOut := runMk(t, "--preset", "tiny", "--format", "pte", "--out", pteDir, "--tokenizer", testTokenizer, "--ctx", "64", "--prefill-chunk", "8"); code != 0 {
		t.Fatalf("mkmodel pte: %s", errOut)
	}
	genieDir := filepath.Join(t.TempDir(), "g")
	if code, _, errOut := runMk(t, "--preset", "tiny", "--format", "genie", "--out", genieDir, "--tokenizer", testTokenizer, "--ctx", "64", "--prefill-chunk", "8"); code != 0 {
		t.Fatalf("mkmodel genie: %s", errOut)
	}
	for _, p := range []string{dir, pteDir, genieDir} {
		var m config.Model
		m.SetLocation(p)
		pr, err := probeModel(m)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(pr.Generated, "random weights") {
			t.Errorf("%s: Generated = %q", p, pr.Generated)
		}
	}
}

// TestLogLoaded: the memory line splits files, buffers and the KV store's
// budget in readable units, names the resolved max_sequences, and the
// gibberish line follows a generated model.
func TestLogLoaded(t *testing.T) {
	var b bytes.Buffer
	logLoaded(zerolog.New(&b), 0, 42_400_000, 1_015_398, 512<<20, 16, "generated by hexserve mkmodel")
	out := b.String()
	for _, want := range []string{`"files":"40.4 MiB"`, `"kv_cache_and_io":"991.6 KiB"`, `"kv_store_budget":"512.0 MiB"`, `"max_sequences":16`, "the text is gibberish by design"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	b.Reset()
	logLoaded(zerolog.New(&b), 0, 1, 1, 0, 1, "")
	if strings.Contains(b.String(), "kv_store") || strings.Contains(b.String(), "gibberish") {
		t.Errorf("no store and real weights, yet: %s", &b)
	}
}

func TestBaseURL(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080/",
		"0.0.0.0:9000":   "http://127.0.0.1:9000/",
		"[::]:9000":      "http://[::1]:9000/",
		":7000":          "http://127.0.0.1:7000/",
	} {
		if got := baseURL(addr, false); got != want {
			t.Errorf("baseURL(%q) = %q, want %q", addr, got, want)
		}
	}
	if got := baseURL("127.0.0.1:443", true); got != "https://127.0.0.1:443/" {
		t.Errorf("tls: %q", got)
	}
}

// TestUseHostsim: a config that left the libraries at their defaults runs on
// hostsim's when they are built under the working folder; one that names
// libraries keeps them.
func TestUseHostsim(t *testing.T) {
	dir := t.TempDir()
	sim := filepath.Join(dir, "build", "hostsim", runtime.GOARCH)
	os.MkdirAll(sim, 0o755)
	os.WriteFile(filepath.Join(sim, "libQnnHtp.so"), nil, 0o644)
	t.Chdir(dir)
	cfg := config.Default()
	if got := useHostsim(&cfg); got != sim || cfg.Model.Libraries.Backend != filepath.Join(sim, "libQnnHtp.so") ||
		cfg.Model.Libraries.RPCMem != filepath.Join(sim, "libcdsprpc.so") {
		t.Errorf("defaults: dir %q, libraries %+v", got, cfg.Model.Libraries)
	}
	cfg = config.Default()
	cfg.Model.Libraries.Backend = "/opt/qnn/libQnnHtp.so"
	if got := useHostsim(&cfg); got != "" || cfg.Model.Libraries.Backend != "/opt/qnn/libQnnHtp.so" {
		t.Errorf("configured: dir %q, libraries %+v", got, cfg.Model.Libraries)
	}
}

// TestLibraryHint: a failure to open the default (bare-name) libraries names
// what to do; configured libraries and other errors pass unchanged.
func TestLibraryHint(t *testing.T) {
	load := errors.New("qnn: load backend library libQnnHtp.so: libQnnHtp.so: cannot open shared object file")
	cfg := config.Default()
	if got := libraryHint(load, cfg).Error(); !strings.Contains(got, "hexserve serve --config configs/dev.yaml") || !strings.Contains(got, "model.libraries") {
		t.Errorf("default libraries: %q", got)
	}
	cfg.Model.Libraries.Backend = "/opt/libQnnHtp.so"
	if got := libraryHint(load, cfg); got != load {
		t.Errorf("configured libraries: %v", got)
	}
	other := errors.New("bundle: bad manifest")
	if got := libraryHint(other, config.Default()); got != other {
		t.Errorf("other error: %v", got)
	}
}
