package testjsonl

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRead: each line is one value, in order.
func TestRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.jsonl")
	if err := os.WriteFile(path, []byte("{\"n\":1}\n{\"n\":2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got := Read[struct{ N int }](t, path)
	if len(got) != 2 || got[0].N != 1 || got[1].N != 2 {
		t.Fatalf("read %v", got)
	}
}
