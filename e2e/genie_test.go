package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Qualcomm AI Hub Genie bundles of the public tiny model (mkmodel --format genie) served through
// the real binary: detection of a folder holding genie_config.json, the runner behind the engine.

var (
	genieMu   sync.Mutex
	genieDirs = map[string]string{}
)

// mkgenie writes (once per flag set) a tiny Genie bundle with float16 weights and returns its folder.
func mkgenie(t testing.TB, flags ...string) string {
	t.Helper()
	bin := binary(t)
	hostsimLibs(t)
	key := strings.Join(flags, " ")
	genieMu.Lock()
	defer genieMu.Unlock()
	if p, ok := genieDirs[key]; ok {
		return p
	}
	dir, err := os.MkdirTemp(tmpRoot, "genie-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := append([]string{"mkmodel", "--preset", "tiny", "--format", "genie", "--weights", "f16", "--name", "tiny",
		"--ctx", "1024", "--out", dir}, flags...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mkmodel %v: %v\n%s", args, err, out)
	}
	genieDirs[key] = dir
	return dir
}

// serveGenie serves a Genie bundle folder through model.path.
func serveGenie(t *testing.T, dir string) *hexserve {
	t.Helper()
	cfg := config{Model: fmt.Sprintf("  path: %q\n  aliases: [x]", dir)}.write(t, hostsimLibs(t))
	s := serve(t, cfg, true)
	s.Model = "x"
	return s
}

// TestGenieGolden: the f32 precision's greedy output equals the golden cases with 3 parts (the
// embedding, one layer, the other layer and the head), 4 parts (the head alone) and AR 32.
func TestGenieGolden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"parts3", []string{"--precision", "f32", "--parts", "3", "--prefill-chunk", "16"}},
		{"parts4", []string{"--precision", "f32", "--parts", "4", "--prefill-chunk", "16"}},
		{"ar32", []string{"--precision", "f32", "--prefill-chunk", "32"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serveGenie(t, mkgenie(t, tc.flags...))
			checkGolden(t, s)
		})
	}
}
