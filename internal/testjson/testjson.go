// Package testjson edits the JSON files of the tests (manifests, configs) as
// generic maps, to make the broken or changed inputs a test needs.
package testjson

import (
	"encoding/json"
	"os"
	"testing"
)

// Edit rewrites the JSON object in the file at path through edit, indented
// by two spaces. A file that cannot be read, decoded or written fails t.
func Edit(t testing.TB, path string, edit func(m map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	edit(m)
	if b, err = json.MarshalIndent(m, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
