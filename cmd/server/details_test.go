package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestModelDetails(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "v79")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"manifest.json": "{}", "prefill.bin": "12345"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := modelDetails(filepath.Dir(dir), "Llama-3.2-3B-Instruct-w8a16")
	if err != nil {
		t.Fatal(err)
	}
	if d.Format != "qhexrt" || d.Family != "llama" || d.Size != 7 || d.ParameterSize != "3B" || d.Quantization != "W8A16" ||
		!strings.HasPrefix(d.Digest, "sha256:") || d.ModifiedAt.IsZero() {
		t.Fatalf("details %+v", d)
	}
	// A changed file changes the digest; the name alone says nothing of size.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "prefill.bin"), later, later); err != nil {
		t.Fatal(err)
	}
	d2, err := modelDetails(filepath.Dir(dir), "tinyllama-public")
	if err != nil || d2.Digest == d.Digest || d2.ParameterSize != "" || d2.Quantization != "" {
		t.Fatalf("after touch: %+v (%v)", d2, err)
	}
	for name, want := range map[string]string{"llama3.2_1b": "1B", "model-0.5B": "0.5B", "Llama-3.2-1B": "1B", "x-8bit": ""} {
		got := ""
		if m := paramSize.FindStringSubmatch(name); m != nil {
			got = m[1] + strings.ToUpper(m[2])
		}
		if got != want {
			t.Errorf("%s: parameter size %q, want %q", name, got, want)
		}
	}
}
