package upstream

import (
	"testing"

	"github.com/hexserve/hexserve/internal/modelfile"
	"github.com/hexserve/hexserve/internal/modelfile/modelfiletest"
)

// TestFilesRefuseSpecialFiles: the key file and the CA bundle go through the safe reader: a
// FIFO or a device is refused, never waited on, and a file over its cap before it is read.
func TestFilesRefuseSpecialFiles(t *testing.T) {
	t.Run("key file", func(t *testing.T) {
		modelfiletest.Refuses(t, modelfile.MaxConfig, func(path string) error { _, err := KeyFrom("", path); return err })
	})
	t.Run("CA bundle", func(t *testing.T) {
		modelfiletest.Refuses(t, modelfile.MaxPEM, func(path string) error { _, err := LoadCAs(path); return err })
	})
}
