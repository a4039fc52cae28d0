package tokenizer

import (
	"testing"

	"github.com/hexserve/hexserve/internal/modelfile"
	"github.com/hexserve/hexserve/internal/modelfile/modelfiletest"
)

// TestLoadRefusesSpecialFiles: the tokenizer of every format (a bundle's, a .pte's, a Genie
// bundle's, model.tokenizer) is read through the model-file reader: a FIFO, /dev/zero or a file
// over the 64 MiB cap is refused within 5 s, naming the file, instead of blocking or filling
// memory.
func TestLoadRefusesSpecialFiles(t *testing.T) {
	modelfiletest.Refuses(t, modelfile.MaxTokenizer, func(path string) error { _, err := Load(path); return err })
}
