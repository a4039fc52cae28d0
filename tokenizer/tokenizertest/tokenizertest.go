// Package tokenizertest gives other packages' tests the repository's
// Llama-3.2 tokenizer (testdata/tokenizer/llama3.2), loaded once per test
// binary and shared: it is read-only once loaded; and the official family
// files of ../shared.
package tokenizertest

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/hexserve/hexserve/tokenizer"
)

var (
	once sync.Once
	tok  *tokenizer.Tokenizer
	err  error
)

// Path is the test tokenizer's tokenizer.json.
func Path() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "tokenizer", "llama3.2", "tokenizer.json")
}

// Llama32 is the Llama-3.2 test tokenizer; a failed load fails t.
func Llama32(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	once.Do(func() { tok, err = tokenizer.Load(Path()) })
	if err != nil {
		t.Fatalf("load tokenizer: %v", err)
	}
	return tok
}

// FamilyDir is the directory of a family's official files (tokenizer and
// template) in ../shared/testdata/families, beside the repository; when it
// is missing t is skipped, or failed under CI=true.
func FamilyDir(t testing.TB, name string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "testdata", "families", name)
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skipf("%s is missing (official files live in ../shared): %v", dir, err)
	}
	return dir
}
