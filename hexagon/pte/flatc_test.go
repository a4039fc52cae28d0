package pte_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/hexserve/hexserve/hexagon/pte/ptewrite"
)

// flatcJSON decodes a flatbuffer with Google's flatc against schema (in
// testdata/), an independent check of the wire format.
func flatcJSON(t *testing.T, schema string, data []byte) map[string]any {
	t.Helper()
	flatc, err := exec.LookPath("flatc")
	if err != nil {
		t.Skip("flatc is not installed (Debian: flatbuffers-compiler); it cross-checks the writer's wire format")
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.bin")
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(flatc, "--raw-binary", "-t", "--strict-json", "-o", dir, "testdata/"+schema, "--", in)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("flatc: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "in.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestFlatcSeesTheSameProgram: flatc decodes the real program and the
// writer's re-write of it to the same JSON, except the container metadata
// strings the writer leaves empty and the compile spec bytes (whose decoded
// options are compared separately).
func TestFlatcSeesTheSameProgram(t *testing.T) {
	raw, err := os.ReadFile(realPTE)
	if err != nil {
		t.Fatal(err)
	}
	real := open(t, realPTE)
	var b bytes.Buffer
	if err := ptewrite.Write(&b, program(t, real)); err != nil {
		t.Fatal(err)
	}
	written := b.Bytes()
	want := flatcJSON(t, "program.fbs", raw[:real.Header.ProgramSize])
	got := flatcJSON(t, "program.fbs", written)
	var specs []map[string]any
	for _, p := range []map[string]any{want, got} {
		plans := p["execution_plan"].([]any)
		for _, pl := range plans {
			pl := pl.(map[string]any)
			delete(pl, "container_meta_type")
			for _, d := range pl["delegates"].([]any) {
				for _, cs := range d.(map[string]any)["compile_specs"].([]any) {
					cs := cs.(map[string]any)
					v := cs["value"].([]any)
					spec := make([]byte, len(v))
					for i, x := range v {
						spec[i] = byte(x.(float64))
					}
					specs = append(specs, flatcJSON(t, "qc_compiler_spec.fbs", spec))
					delete(cs, "value")
				}
			}
		}
		sort.Slice(plans, func(i, j int) bool {
			return plans[i].(map[string]any)["name"].(string) < plans[j].(map[string]any)["name"].(string)
		})
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("flatc decodes the written program differently from the real one")
	}
	for _, s := range specs[1:] {
		if !reflect.DeepEqual(s, specs[0]) {
			t.Errorf("compile spec decodes to %v, want %v", s, specs[0])
		}
	}
	if len(specs) != 4 {
		t.Errorf("%d compile specs, want 2 real + 2 written", len(specs))
	}
	flatcJSON(t, "program.fbs", mustWrite(t, shardedProgram()))
}

func mustWrite(t *testing.T, p ptewrite.Program) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := ptewrite.Write(&b, p); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
