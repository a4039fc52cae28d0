// Package testjsonl reads the JSON Lines files of the tests (the chat and
// tokenizer goldens): one JSON value per line, each decoded into a T.
package testjsonl

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

// Read decodes every line of the file at path; a file that cannot be read
// or a line that does not decode fails tb, as does a file with no lines.
func Read[T any](tb testing.TB, path string) []T {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			tb.Fatalf("%s line %d: %v", path, len(out)+1, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	if len(out) == 0 {
		tb.Fatalf("%s: no lines", path)
	}
	return out
}
