package repotest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines is the longest a non-test Go function may be (DEVELOPERS.md), from its func
// keyword to its closing brace.
const maxFuncLines = 80

// funcLenExempt are the paths the rule leaves out (issue 51's Goals): the benchmark harness, the
// binary's flag parsing, and the reference tooling.
var funcLenExempt = []string{"bench/", "cmd/server/main.go", "internal/tinyllama/"}

// TestFunctionLength: no non-test Go function outside funcLenExempt is over maxFuncLines lines.
func TestFunctionLength(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	long, err := longFuncs(root)
	if err != nil {
		t.Fatal(err)
	}
	for key, n := range long {
		t.Errorf("%s is %d lines, over %d: split it by step", key, n, maxFuncLines)
	}
}

// TestLongFuncsDetects: the scan finds a function over the limit and passes one at it.
func TestLongFuncsDetects(t *testing.T) {
	dir := t.TempDir()
	body := func(name string, lines int) string {
		return "func " + name + "() {\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
	}
	src := "package p\n\n" + body("atLimit", maxFuncLines) + body("over", maxFuncLines+1)
	write(t, filepath.Join(dir, "p", "p.go"), src)
	write(t, filepath.Join(dir, "p", "p_test.go"), "package p\n\n"+body("testOver", maxFuncLines+5))
	write(t, filepath.Join(dir, "bench", "b.go"), "package bench\n\n"+body("exempt", maxFuncLines+5))
	long, err := longFuncs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(long) != 1 || long["p/p.go:over"] != maxFuncLines+1 {
		t.Errorf("long functions %v, want only p/p.go:over (%d lines)", long, maxFuncLines+1)
	}
}

// longFuncs maps "path:Name" to the line count of every non-test function over maxFuncLines in
// the tree at root, outside funcLenExempt, vendored code and hidden or node_modules folders.
func longFuncs(root string) (map[string]int, error) {
	long := map[string]int{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") ||
			slices.ContainsFunc(funcLenExempt, func(p string) bool { return strings.HasPrefix(rel, p) }) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Body != nil {
				if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
					long[rel+":"+fd.Name.Name] = n
				}
			}
		}
		return nil
	})
	return long, err
}

// write writes text to path, making its folder.
func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
