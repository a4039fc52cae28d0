package testjson

import (
	"os"
	"path/filepath"
	"testing"
)

// TestEdit: the edit is written back and the other keys are kept.
func TestEdit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.json")
	if err := os.WriteFile(path, []byte(`{"a": 1, "b": {"c": "d"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	Edit(t, path, func(m map[string]any) { m["b"].(map[string]any)["c"] = "e" })
	b, err := os.ReadFile(path)
	if want := "{\n  \"a\": 1,\n  \"b\": {\n    \"c\": \"e\"\n  }\n}"; err != nil || string(b) != want {
		t.Fatalf("file %q (%v), want %q", b, err, want)
	}
}
