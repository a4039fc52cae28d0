package repotest

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/hexserve/hexserve"

// pkg is the part of `go list -json` output these tests read.
type pkg struct {
	ImportPath string
	Dir        string
	Doc        string
	Name       string
	Deps       []string
	Error      *struct{ Err string }
}

// goList runs `go list -e -json args...` from the module root.
func goList(t *testing.T, args ...string) []pkg {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH; these tests need `go list`")
	}
	cmd := exec.Command(goBin, append([]string{"list", "-e", "-json"}, args...)...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, &stderr)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// forbiddenDeps returns the deps that the pure layers may not import: the
// NPU binding (hexagon/...) and purego.
func forbiddenDeps(deps []string) []string {
	var bad []string
	for _, d := range deps {
		if d == module+"/hexagon" || strings.HasPrefix(d, module+"/hexagon/") ||
			d == "github.com/ebitengine/purego" || strings.HasPrefix(d, "github.com/ebitengine/purego/") {
			bad = append(bad, d)
		}
	}
	return bad
}

func TestForbiddenDeps(t *testing.T) {
	got := forbiddenDeps([]string{"fmt", module + "/hexagon", module + "/hexagonal", module + "/hexagon/qnn",
		"github.com/ebitengine/purego", "github.com/ebitengine/purego/internal/fakecgo", module + "/chat"})
	want := []string{module + "/hexagon", module + "/hexagon/qnn", "github.com/ebitengine/purego", "github.com/ebitengine/purego/internal/fakecgo"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("forbiddenDeps = %v, want %v", got, want)
	}
}

// The API, template, tokenizer and scheduling layers never reach the NPU
// binding: they stay testable anywhere and portable to other backends.
// Test imports count too.
func TestLayering(t *testing.T) {
	pure := []string{"./openai/...", "./chat/...", "./tokenizer/...", "./inference/...", "./responses/..."}
	pkgs := goList(t, append([]string{"-deps=false", "-test"}, pure...)...)
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	for _, p := range pkgs {
		if p.Error != nil {
			t.Logf("%s: %s (skipped: does not load)", p.ImportPath, p.Error.Err)
			continue
		}
		if bad := forbiddenDeps(p.Deps); len(bad) > 0 {
			t.Errorf("%s imports %s (directly or indirectly); these layers must not depend on hexagon/ or purego",
				p.ImportPath, strings.Join(bad, ", "))
		}
	}
}

// The check sees real `go list` output: the NPU binding itself does depend
// on purego.
func TestLayeringDetects(t *testing.T) {
	pkgs := goList(t, "./hexagon/qnn")
	if len(pkgs) != 1 || pkgs[0].Error != nil {
		t.Skipf("hexagon/qnn does not load: %+v", pkgs)
	}
	if len(forbiddenDeps(pkgs[0].Deps)) == 0 {
		t.Fatalf("no forbidden deps found in hexagon/qnn's deps %v", pkgs[0].Deps)
	}
}

// Every package in the module says what it provides.
func TestPackageDocs(t *testing.T) {
	for _, p := range goList(t, "./...") {
		if p.Error != nil {
			t.Logf("%s: %s (skipped: does not load)", p.ImportPath, p.Error.Err)
			continue
		}
		if strings.TrimSpace(p.Doc) == "" {
			t.Errorf("%s (%s) has no package doc comment", p.ImportPath, p.Dir)
		}
	}
}
