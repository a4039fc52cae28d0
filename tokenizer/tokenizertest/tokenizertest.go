// Package tokenizertest gives other packages' tests the repository's
// Llama-3.2 tokenizer (testdata/tokenizer/llama3.2), loaded once per test
// binary and shared: it is read-only once loaded.
package tokenizertest

import (
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
