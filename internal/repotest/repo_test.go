package repotest

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
	Imports    []string
	Error      *struct{ Err string }
}

// goList runs `go list -e -json args...` from the module root.
func goList(t *testing.T, args ...string) []pkg {
	t.Helper()
	return goListEnv(t, nil, args...)
}

// goListEnv is goList with env added to the environment (GOOS=…).
func goListEnv(t *testing.T, env []string, args ...string) []pkg {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH; these tests need `go list`")
	}
	cmd := exec.Command(goBin, append([]string{"list", "-e", "-json"}, args...)...)
	cmd.Dir = "../.."
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
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

// Layers of the module, by import path relative to the module (a path
// belongs to the first entry whose prefix it equals or extends). Anything
// under hexagon/ that is not listed is a runner: packages added there later
// (hexagon/pte, runner siblings) are covered without editing this table.
// A package in no layer fails the test, so every package gets a rule.
var layerPrefixes = []struct{ prefix, layer string }{
	{"openai", "pure"}, {"ollama", "pure"}, {"anthropic", "pure"}, {"chat", "pure"}, {"tokenizer", "pure"}, {"inference", "pure"}, {"respstore", "pure"}, {"grammar", "pure"}, {"registry", "pure"},
	{"upstream", "pure"}, {"apiconv", "pure"}, {"overflow", "pure"},
	{"server", "app"}, {"config", "app"}, {"bench", "app"}, {"webui", "app"},
	{"hexagon/qhexrt/bundle", "support"}, {"hexagon/pte", "support"}, {"hexagon/qnn", "support"}, {"hexagon/hostsim", "support"},
	{"hexagon/graphio", "support"}, {"hexagon/writeback", "support"}, {"hexagon/slotpool", "support"}, {"hexagon/plan", "support"},
	{"internal", "support"},
	{"hexagon", "runner"},
	{"cmd", "main"}, {"e2e", "main"},
}

// forbidden lists, per layer, the layers (and external modules) it may not
// import, directly or indirectly, test imports included:
//   - the API, template, tokenizer and scheduling layers never reach the NPU
//     (no hexagon/ package, no purego) nor the app layer;
//   - server, config and bench never import a runner, the QNN binding or purego
//     (config reads the manifest format, hexagon/qhexrt/bundle);
//   - support packages never import a runner or the app;
//   - runners never import the app (the binary wires them together), nor a
//     sibling runner (hexagon/qhexrt and hexagon/executorch share only the
//     support packages: hexagon/qnn, hexagon/graphio, hexagon/writeback, hexagon/slotpool,
//     hexagon/plan).
var forbidden = map[string][]string{
	"pure":    {"runner", "support:hexagon", "app", "main", "purego"},
	"app":     {"runner", "support:hexagon/qnn", "support:hexagon/hostsim", "main", "purego"},
	"support": {"runner", "app", "main"},
	"runner":  {"app", "main"},
}

// layerOf returns the layer of an import path, "external" outside the
// module, or "" for a module package in no layer.
func layerOf(path string) string {
	rel, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		if path == "github.com/ebitengine/purego" || strings.HasPrefix(path, "github.com/ebitengine/purego/") {
			return "purego"
		}
		return "external"
	}
	for _, l := range layerPrefixes {
		if rel == l.prefix || strings.HasPrefix(rel, l.prefix+"/") {
			return l.layer
		}
	}
	return ""
}

// violations returns the deps of a package in layer that its rules forbid.
func violations(layer string, deps []string) []string {
	var bad []string
	for _, d := range deps {
		dl := layerOf(basePath(d))
		for _, f := range forbidden[layer] {
			rule, prefix, scoped := strings.Cut(f, ":")
			if dl == rule && (!scoped || d == module+"/"+prefix || strings.HasPrefix(d, module+"/"+prefix+"/")) {
				bad = append(bad, d)
				break
			}
		}
	}
	return bad
}

// siblings returns the deps of runner package path that belong to another
// runner (a different hexagon/<name> tree).
func siblings(path string, deps []string) []string {
	root := func(p string) string {
		rel := strings.TrimPrefix(basePath(p), module+"/")
		parts := strings.SplitN(rel, "/", 3)
		return strings.Join(parts[:min(2, len(parts))], "/")
	}
	var bad []string
	for _, d := range deps {
		if layerOf(basePath(d)) == "runner" && root(d) != root(path) {
			bad = append(bad, d)
		}
	}
	return bad
}

// basePath strips go list's test decorations: "p [p.test]" → p, "p_test" → p.
func basePath(importPath string) string {
	p, _, _ := strings.Cut(importPath, " ")
	return strings.TrimSuffix(p, "_test")
}

// apiPackages convert one client API each; what they share is in apiconv/.
var apiPackages = []string{module + "/openai", module + "/anthropic", module + "/ollama"}

// apiSiblings returns the deps of package path, when it is an API package,
// that are another API package.
func apiSiblings(path string, deps []string) []string {
	if !slices.Contains(apiPackages, path) {
		return nil
	}
	var bad []string
	for _, d := range deps {
		if d := basePath(d); d != path && slices.Contains(apiPackages, d) {
			bad = append(bad, d)
		}
	}
	return bad
}

func TestLayerRules(t *testing.T) {
	for _, c := range []struct{ path, layer string }{
		{module + "/openai", "pure"}, {module + "/inference/inferencetest", "pure"}, {module + "/server", "app"},
		{module + "/config", "app"}, {module + "/hexagon", "runner"}, {module + "/hexagon/pte", "support"}, {module + "/hexagon/etrunner", "runner"}, {module + "/hexagon/executorch", "runner"}, {module + "/hexagon/pte/ptesim", "support"},
		{module + "/hexagon/llama", "runner"}, {module + "/hexagon/qhexrt/bundle", "support"}, {module + "/hexagon/qhexrt", "runner"},
		{module + "/hexagon/hostsim/simfile", "support"}, {module + "/hexagonal", ""}, {module + "/newpkg", ""},
		{module + "/cmd/server", "main"}, {"github.com/ebitengine/purego/internal/fakecgo", "purego"}, {"fmt", "external"},
	} {
		if got := layerOf(c.path); got != c.layer {
			t.Errorf("layerOf(%s) = %q, want %q", c.path, got, c.layer)
		}
	}
	for _, c := range []struct {
		layer string
		deps  []string
		want  string
	}{
		{"pure", []string{"fmt", module + "/hexagon/qnn", module + "/internal/half", "github.com/ebitengine/purego"}, module + "/hexagon/qnn github.com/ebitengine/purego"},
		{"pure", []string{module + "/hexagon/pte"}, module + "/hexagon/pte"}, {"pure", []string{module + "/hexagon/etrunner"}, module + "/hexagon/etrunner"},
		{"app", []string{module + "/hexagon/qhexrt/bundle", module + "/hexagon"}, module + "/hexagon"},
		{"app", []string{module + "/hexagon/etrunner", module + "/hexagon/qnn", module + "/chat"}, module + "/hexagon/etrunner " + module + "/hexagon/qnn"},
		{"support", []string{module + "/hexagon/qhexrt/bundle", module + "/server"}, module + "/server"},
		{"runner", []string{module + "/hexagon/qnn", module + "/config"}, module + "/config"},
		{"main", []string{module + "/hexagon", module + "/server"}, ""},
	} {
		if got := strings.Join(violations(c.layer, c.deps), " "); got != c.want {
			t.Errorf("violations(%s, %v) = %q, want %q", c.layer, c.deps, got, c.want)
		}
	}
	if got := apiSiblings(module+"/ollama", []string{module + "/apiconv", module + "/openai"}); !slices.Equal(got, []string{module + "/openai"}) {
		t.Errorf("apiSiblings(ollama) = %v, want openai", got)
	}
	if layerOf(module+"/hexagon/graphio") != "support" || layerOf(module+"/hexagon/plan") != "support" {
		t.Error("the runners' shared packages are not support packages")
	}
	deps := []string{module + "/hexagon/qnn", module + "/hexagon/graphio", module + "/hexagon/qhexrt", module + "/hexagon/executorch/x"}
	if got := strings.Join(siblings(module+"/hexagon/executorch", deps), " "); got != module+"/hexagon/qhexrt" {
		t.Errorf("siblings(executorch) = %q, want qhexrt", got)
	}
	if got := strings.Join(siblings(module+"/hexagon/qhexrt", deps), " "); got != module+"/hexagon/executorch/x" {
		t.Errorf("siblings(qhexrt) = %q, want executorch/x", got)
	}
}

// TestLayering checks every package of the module, test variants included,
// against the layer rules. A package that does not load fails: its deps
// would be unknown.
func TestLayering(t *testing.T) {
	pkgs := goList(t, "-deps=false", "-test", "./...")
	seen := map[string]bool{}
	for _, p := range pkgs {
		if strings.HasSuffix(p.ImportPath, ".test") {
			continue // the generated test main
		}
		if p.Error != nil {
			t.Errorf("%s does not load: %s", p.ImportPath, p.Error.Err)
			continue
		}
		path := basePath(p.ImportPath)
		layer := layerOf(path)
		if layer == "" {
			t.Errorf("%s is in no layer: add it to layerPrefixes", path)
			continue
		}
		seen[layer] = true
		if bad := violations(layer, p.Deps); len(bad) > 0 {
			t.Errorf("%s (%s) imports %s (directly or indirectly); %s packages may not depend on %s",
				p.ImportPath, layer, strings.Join(bad, ", "), layer, strings.Join(forbidden[layer], ", "))
		}
		if bad := apiSiblings(path, p.Deps); len(bad) > 0 {
			t.Errorf("API package %s imports the API package %s; what the APIs share is in apiconv/", path, strings.Join(bad, ", "))
		}
		if layer == "runner" {
			if bad := siblings(path, p.Deps); len(bad) > 0 {
				t.Errorf("runner %s imports the sibling runner %s; share code through hexagon/graphio or hexagon/plan", path, strings.Join(bad, ", "))
			}
		}
	}
	for _, l := range []string{"pure", "app", "support", "runner", "main"} {
		if !seen[l] {
			t.Errorf("no package in layer %s: go list output changed?", l)
		}
	}
}

// TestImportRules: the wire packages (the APIs' conversions, what they
// share, the upstream chat client's types) import no net/http, since the
// server decodes, calls the conversions and writes; chat imports only the
// standard library and its Jinja engine (which has no dependencies of its
// own; in particular not tokenizer: callers convert Segments themselves).
func TestImportRules(t *testing.T) {
	for _, p := range goList(t, "./openai", "./anthropic", "./ollama", "./apiconv", "./upstream/chatwire", "./chat") {
		if p.Error != nil {
			t.Errorf("%s does not load: %s", p.ImportPath, p.Error.Err)
			continue
		}
		for _, imp := range p.Imports {
			first, _, _ := strings.Cut(imp, "/")
			switch {
			case p.ImportPath == module+"/chat" && strings.Contains(first, ".") && imp != "github.com/ardanlabs/jinja":
				t.Errorf("chat imports %s; it imports only the standard library and github.com/ardanlabs/jinja", imp)
			case imp == "net/http" || strings.HasPrefix(imp, "net/http/"):
				t.Errorf("%s imports %s; the wire packages leave HTTP to server/", p.ImportPath, imp)
			}
		}
	}
}

// The rules see real `go list` output: the NPU binding itself depends on
// purego, which the pure layers may not reach.
func TestLayeringDetects(t *testing.T) {
	pkgs := goList(t, "./hexagon/qnn")
	if len(pkgs) != 1 || pkgs[0].Error != nil {
		t.Fatalf("hexagon/qnn does not load: %+v", pkgs)
	}
	if len(violations("pure", pkgs[0].Deps)) == 0 {
		t.Fatalf("no forbidden deps found in hexagon/qnn's deps %v", pkgs[0].Deps)
	}
}

// Every package in the module says what it provides.
func TestPackageDocs(t *testing.T) {
	for _, p := range goList(t, "./...") {
		if p.Error != nil {
			t.Errorf("%s does not load: %s", p.ImportPath, p.Error.Err)
			continue
		}
		if strings.TrimSpace(p.Doc) == "" {
			t.Errorf("%s (%s) has no package doc comment", p.ImportPath, p.Dir)
		}
	}
}

// docs/architecture.md's package map names every package directory (as
// `dir/`), so the map cannot fall behind the tree.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := goList(t, "./...")
	for _, p := range pkgs {
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Errorf("%s: directory %s is outside the module", p.ImportPath, p.Dir)
			continue
		}
		if name := "`" + filepath.ToSlash(rel) + "/`"; !bytes.Contains(doc, []byte(name)) {
			t.Errorf("docs/architecture.md does not name %s: add it to the package map", name)
		}
	}
	if len(pkgs) < 20 {
		t.Errorf("only %d packages listed: go list output changed?", len(pkgs))
	}
}

// The data-flow diagram of docs/architecture.md names every runner (a
// package of the runner layer that is no test-model writer) and every
// hexagon/ package two or more runners import (their shared layer), so the
// diagram cannot fall behind the runners.
func TestArchitectureDiagram(t *testing.T) {
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(doc), "## Data flow")
	_, rest, _ = strings.Cut(rest, "```")
	diagram, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/architecture.md: no diagram after ## Data flow")
	}
	importers := map[string]int{}
	var want []string
	for _, p := range goList(t, "./hexagon/...") {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		if layerOf(p.ImportPath) != "runner" || slices.ContainsFunc(testModelWriters, func(w string) bool { return rel == w || strings.HasPrefix(rel, w+"/") }) {
			continue
		}
		want = append(want, rel)
		for _, imp := range p.Imports {
			if r := strings.TrimPrefix(imp, module+"/"); r != imp && strings.HasPrefix(r, "hexagon/") {
				importers[r]++
			}
		}
	}
	for r, n := range importers {
		if n >= 2 {
			want = append(want, r)
		}
	}
	if len(want) < 4 {
		t.Fatalf("found only %v: go list output changed?", want)
	}
	for _, w := range want {
		if !regexp.MustCompile(`(^|[^/\w])` + regexp.QuoteMeta(w) + `\b`).MatchString(diagram) {
			t.Errorf("docs/architecture.md's diagram does not name %s", w)
		}
	}
}

// testModelWriters are the packages that write hostsim test models (context
// binaries, bundles, .pte files) and the tiny-Llama weights: `hexserve
// mkmodel`'s, left out of the phone binary by -tags nomkmodel.
var testModelWriters = []string{"hexagon/hostsim", "hexagon/qhexrt/bundle/bundlesim", "hexagon/pte/ptewrite", "hexagon/pte/ptesim", "hexagon/genie/geniesim", "internal/tinyllama"}

// writersIn returns the deps that are test-model writers.
func writersIn(deps []string) []string {
	var bad []string
	for _, d := range deps {
		rel, ok := strings.CutPrefix(d, module+"/")
		if !ok {
			continue
		}
		for _, w := range testModelWriters {
			if rel == w || strings.HasPrefix(rel, w+"/") {
				bad = append(bad, rel)
			}
		}
	}
	return bad
}

// The phone binary, built as `make android` builds it (GOOS=android
// GOARCH=arm64 CGO_ENABLED=1 -tags nomkmodel), links none of the
// test-model writers; without the tag it does, which shows the check sees
// them.
func TestAndroidBuildDeps(t *testing.T) {
	env := []string{"GOOS=android", "GOARCH=arm64", "CGO_ENABLED=1", "GOFLAGS="}
	for _, c := range []struct {
		tags    []string
		writers bool
	}{{[]string{"-tags", "nomkmodel"}, false}, {nil, true}} {
		pkgs := goListEnv(t, env, append(append([]string{"-deps=false"}, c.tags...), "./cmd/server")...)
		if len(pkgs) != 1 || pkgs[0].Error != nil {
			t.Fatalf("cmd/server %v does not load for android/arm64: %+v", c.tags, pkgs)
		}
		bad := writersIn(pkgs[0].Deps)
		switch {
		case !c.writers && len(bad) > 0:
			t.Errorf("the android build (%v) links the test-model writers %s; keep them behind !nomkmodel",
				c.tags, strings.Join(bad, ", "))
		case c.writers && len(bad) == 0:
			t.Errorf("the android build without nomkmodel links no test-model writer: the check cannot see them")
		}
	}
}

// README.md's Layout table names every user-facing package: as `dir/`, or,
// for a sub-package, its last element in backticks on its parent's row
// (`hexagon/pte/` … `ptesim`). Internal packages, tests and the binary's
// own folder are left out.
func TestReadmeLayoutNamesEveryPackage(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(data), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no ## Layout section")
	}
	layout, _, _ = strings.Cut(layout, "\n## ")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range goList(t, "./...") {
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			continue
		}
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "internal/") || strings.Contains(rel, "/internal/") || strings.HasPrefix(rel, "e2e") || strings.HasSuffix(rel, "test") || rel == "cmd/server" {
			continue
		}
		if strings.Contains(layout, "`"+rel+"/`") {
			continue
		}
		parent, name := filepath.ToSlash(filepath.Dir(rel)), filepath.Base(rel)
		found := false
		for _, row := range strings.Split(layout, "\n") {
			if strings.Contains(row, "`"+parent+"/`") && strings.Contains(row, "`"+name+"`") {
				found = true
			}
		}
		if !found {
			t.Errorf("README.md's Layout table does not name %s/: add a row (or `%s` on %s/'s row)", rel, name, parent)
		}
	}
}
