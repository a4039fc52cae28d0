package config

import (
	"testing"

	"github.com/hexserve/hexserve/internal/modelfile"
	"github.com/hexserve/hexserve/internal/modelfile/modelfiletest"
)

// TestLoadRefusesSpecialFiles: the config file goes through the safe reader: a FIFO or a device
// is refused, never waited on, and a file over modelfile.MaxConfig is refused before it is read.
func TestLoadRefusesSpecialFiles(t *testing.T) {
	modelfiletest.Refuses(t, modelfile.MaxConfig, func(path string) error { _, err := Load(path); return err })
}
