package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// docMarker, on the line before a ```sh fence in README.md or docs/*.md,
// marks a block that TestDocExamples runs as written against a fresh
// `make run` server: every command must exit 0 and every curl get a 2xx.
const docMarker = "<!-- doctest -->"

// docBlock is one marked shell block.
type docBlock struct {
	file string
	line int // of the fence
	text string
}

// docBlocks returns the marked blocks of README.md and docs/*.md, and
// reports a marker that is not followed by a ```sh fence.
func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	var out []docBlock
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		rel, _ := filepath.Rel(root, f)
		for i := 0; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) != docMarker {
				continue
			}
			if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```sh" {
				t.Errorf("%s:%d: %s is not followed by a ```sh fence", rel, i+1, docMarker)
				continue
			}
			b := docBlock{file: rel, line: i + 2}
			var body []string
			for i += 2; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
				body = append(body, lines[i])
			}
			b.text = strings.Join(body, "\n")
			out = append(out, b)
		}
	}
	return out
}

// makeRunAddr matches the address `make run` serves on, as the docs write it.
var makeRunAddr = regexp.MustCompile(`(https?://)?(localhost|127\.0\.0\.1):8080`)

// TestDocExamples runs every marked shell example of README.md and
// docs/*.md against a fresh server started the way `make run` starts it
// (configs/dev.yaml, the tiny bundle, hostsim), on a free port of
// 127.0.0.1 instead of 8080: the docs cannot drift from the code unseen.
// A block runs under bash -euo pipefail from the repository root, with curl
// failing on an HTTP error status (--fail-with-body).
func TestDocExamples(t *testing.T) {
	blocks := docBlocks(t)
	if len(blocks) == 0 {
		t.Fatal("no marked examples: the marker convention is gone")
	}
	for _, need := range []string{"build/models/tiny/v79/manifest.json", "build/hostsim/amd64/libQnnHtp.so"} {
		if _, err := os.Stat(filepath.Join(root, need)); err != nil {
			t.Skipf("configs/dev.yaml needs %s (run make models on an amd64 host): %v", need, err)
		}
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("the examples need curl")
	}
	bin := binary(t)
	s := serveDev(t, bin)
	addr := strings.TrimPrefix(s.URL, "http://")
	// The examples call bin/hexserve: the binary under test, whatever HEXSERVE_BIN says.
	binDir := t.TempDir()
	os.Mkdir(filepath.Join(binDir, "bin"), 0o755)
	if err := os.Symlink(bin, filepath.Join(binDir, "bin", "hexserve")); err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		t.Run(fmt.Sprintf("%s:%d", b.file, b.line), func(t *testing.T) {
			if _, err := exec.LookPath("jq"); err != nil && strings.Contains(b.text, "jq ") {
				t.Skip("this example needs jq")
			}
			script := makeRunAddr.ReplaceAllStringFunc(b.text, func(m string) string {
				return strings.Replace(strings.Replace(m, "localhost:8080", addr, 1), "127.0.0.1:8080", addr, 1)
			})
			script = strings.ReplaceAll(script, "bin/hexserve", filepath.Join(binDir, "bin", "hexserve"))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\ncurl() { command curl --fail-with-body \"$@\"; }\n"+script)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("%s:%d failed (%v):\n%s\n--- output:\n%s", b.file, b.line, err, script, out)
			}
		})
	}
}

// serveDev starts `hexserve serve --config configs/dev.yaml --addr
// 127.0.0.1:PORT` (what `make run ADDR=…` runs) on a free port and waits
// for /health 200; it is stopped when the test ends.
func serveDev(t *testing.T, bin string) *hexserve {
	t.Helper()
	var s *hexserve
	var err error
	for range 3 { // the free port may be taken between its probe and the bind
		var port int
		if port, err = freePort(); err != nil {
			t.Fatal(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		cmd := exec.Command(bin, "serve", "--config", "configs/dev.yaml", "--addr", addr)
		cmd.Dir = root
		if s, err = spawn(cmd, nil); err != nil {
			t.Fatal(err)
		}
		s.URL = "http://" + addr
		if err = s.waitHealthy(30 * time.Second); err == nil {
			break
		}
		s.stop()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
