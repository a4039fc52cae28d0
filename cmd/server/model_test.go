package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/internal/hostsimtest"
)

// testTokenizer is the repository's Llama-3.2 tokenizer.
const testTokenizer = "../../testdata/tokenizer/llama3.2/tokenizer.json"

var storiesPTE = filepath.Join("..", "..", "hexagon", "pte", "testdata", "stories260k_hybrid_llama_qnn.pte")

func TestLocateModel(t *testing.T) {
	dir := t.TempDir()
	pteData, err := os.ReadFile(storiesPTE)
	if err != nil {
		t.Fatal(err)
	}
	write := func(p string, b []byte) string {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	one := write("one/model.pte", pteData)
	write("two/a.pte", pteData)
	write("two/b.pte", pteData)
	write("fake/not.pte", []byte("not an ExecuTorch program"))
	manifest := write("bundle/v79/manifest.json", []byte("{}"))
	write("flat/manifest.json", []byte("{}"))
	for _, tc := range []struct {
		path string
		kind modelKind
		file string
		err  string
	}{
		{one, kindPTE, one, ""},
		{filepath.Join(dir, "one"), kindPTE, one, ""},
		{filepath.Join(dir, "two"), nil, "", "holds 2 .pte files (a.pte, b.pte)"},
		{filepath.Join(dir, "fake"), kindBundle, filepath.Join(dir, "fake"), ""}, // no ET12: the bundle reader reports it
		{filepath.Join(dir, "bundle"), kindBundle, filepath.Join(dir, "bundle"), ""},
		{filepath.Join(dir, "bundle", "v79"), kindBundle, filepath.Join(dir, "bundle", "v79"), ""},
		{manifest, kindBundle, manifest, ""},
		{filepath.Join(dir, "flat"), kindBundle, filepath.Join(dir, "flat"), ""},
		{filepath.Join(dir, "missing"), nil, "", "no such file"},
	} {
		kind, file, err := locateModel(tc.path)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.path, err, tc.err)
			}
		case err != nil || kind != tc.kind || file != tc.file:
			t.Errorf("%s: %v %q %v; want %v %q", tc.path, kind, file, err, tc.kind, tc.file)
		}
	}
}

func TestFindTokenizer(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "a", "b", "c", "m.pte")
	if err := os.MkdirAll(filepath.Dir(model), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := findTokenizer(config.Model{}, model); err == nil || !strings.Contains(err.Error(), "set model.tokenizer") {
		t.Fatalf("no tokenizer anywhere: %v", err)
	}
	for _, d := range []string{filepath.Join(dir, "a"), filepath.Join(dir, "a", "b"), filepath.Join(dir, "a", "b", "c")} {
		if err := os.WriteFile(filepath.Join(d, "tokenizer.json"), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := findTokenizer(config.Model{}, model)
		if err != nil || got != filepath.Join(d, "tokenizer.json") {
			t.Errorf("tokenizer in %s: found %q, %v", d, got, err)
		}
	}
	// Three levels up is too far.
	deep := filepath.Join(dir, "a", "b", "c", "d", "e", "m.pte")
	os.Remove(filepath.Join(dir, "a", "b", "c", "tokenizer.json"))
	os.Remove(filepath.Join(dir, "a", "b", "tokenizer.json"))
	if got, err := findTokenizer(config.Model{}, deep); err == nil {
		t.Errorf("found %s three levels up", got)
	}
	if got, _ := findTokenizer(config.Model{Tokenizer: "/x/tok.json"}, model); got != "/x/tok.json" {
		t.Errorf("model.tokenizer ignored: %s", got)
	}
}

// TestLoadStories: the real stories260K export loads as far as it can off-device: the reader
// accepts it, without a tokenizer the load says how to give one, and with one hostsim's system
// library reports that it cannot read Qualcomm's context binary.
func TestLoadStories(t *testing.T) {
	libs := hostsimLibDir(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "stories.pte")
	data, err := os.ReadFile(storiesPTE)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Model.SetLocation(p)
	cfg.Model.Libraries = librariesIn(libs)
	_, _, _, err = loadModel(cfg, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "no tokenizer for") || !strings.Contains(err.Error(), "model.tokenizer") {
		t.Fatalf("without a tokenizer: %v", err)
	}
	tok, err := filepath.Abs(filepath.Join("..", "..", "testdata", "tokenizer", "llama3.2", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Model.Tokenizer = tok
	_, _, _, err = loadModel(cfg, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "context binary") {
		t.Fatalf("with a tokenizer on hostsim: %v", err)
	}
	t.Logf("with a tokenizer: %v", err)
}

// hostsimLibDir is the hostsim library folder (hostsimtest.Dir).
func hostsimLibDir(t testing.TB) string {
	t.Helper()
	return hostsimtest.Dir(t)
}
