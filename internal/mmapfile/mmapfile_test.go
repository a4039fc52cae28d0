package mmapfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMap: a file maps to its bytes, an empty one to nil, a missing one
// to an error naming it.
func TestMap(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, data string }{{"data", "hexserve"}, {"empty", ""}} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, []byte(tc.data), 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := Map(p)
		if err != nil || string(b) != tc.data || (tc.data == "") != (b == nil) {
			t.Errorf("%s: Map = %q, %v", tc.name, b, err)
		}
		if err := Unmap(b); err != nil {
			t.Errorf("%s: Unmap: %v", tc.name, err)
		}
	}
	if _, err := Map(filepath.Join(dir, "missing")); err == nil || !os.IsNotExist(err) {
		t.Errorf("Map of a missing file: %v", err)
	}
}
