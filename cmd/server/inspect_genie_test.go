//go:build !nomkmodel

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/hexagon/genie"
	"github.com/hexserve/hexserve/hexagon/genie/geniesim"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/internal/testjson"
)

// TestInspectGenie: inspect DIR of a Genie bundle prints the config's values, the rope-scaling
// warning and every part's two graphs with their tensors' types and quantisation.
func TestInspectGenie(t *testing.T) {
	libs := hostsimLibDir(t)
	dir := tinyGenie(t, "w4a16", simfile.WeightInt8)
	args := []string{"--backend", filepath.Join(libs, "libQnnHtp.so"), "--system", filepath.Join(libs, "libQnnSystem.so")}
	var stdout, stderr bytes.Buffer
	if code := inspect(append(append([]string{}, args...), "--json", dir), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, &stderr)
	}
	var got inspectedGenie
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Config == nil || got.Config.Size != 64 || got.Config.KVDim != 16 || len(got.Parts) != 3 || len(got.Warnings) != 1 ||
		!strings.Contains(got.Warnings[0], "factor 32") {
		t.Fatalf("inspect: %+v", got)
	}
	for k, p := range got.Parts {
		if len(p.Graphs) != 2 || !strings.HasPrefix(p.Graphs[0].Name, "prompt_ar8_cl64_") || !strings.HasPrefix(p.Graphs[1].Name, "token_ar1_cl64_") {
			t.Errorf("part %d: graphs %+v", k+1, p.Graphs)
		}
	}
	kv := got.Parts[1].Graphs[0].Inputs
	var q *inspectedQuant
	for _, in := range kv {
		if in.Name == "past_key_0_in" {
			q = in.Quant
			if in.DataType != "UFIXED_POINT_8" {
				t.Errorf("past_key_0_in is %s", in.DataType)
			}
		}
	}
	if q == nil || q.Offset != -128 || !(q.Scale > 0) {
		t.Errorf("past_key_0_in quantisation %+v", q)
	}
	stdout.Reset()
	if code := inspect(append(args, dir), &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "Genie bundle") ||
		!strings.Contains(stdout.String(), "warning: config.json's rope scaling") {
		t.Errorf("text: exit %d\n%s", code, &stdout)
	}
}

// TestInspectGenieReadsWhatItShows: inspect maps the parts instead of reading them into the heap
// (allocating less than the parts' size), and it refuses what serve refuses, saying why, with a
// non-zero exit.
func TestInspectGenieReadsWhatItShows(t *testing.T) {
	libs := hostsimLibDir(t)
	dir := tinyGenie(t, "f32", simfile.WeightF16)
	var parts int64
	for k := 1; k <= 3; k++ {
		st, err := os.Stat(filepath.Join(dir, geniesim.PartFile("tiny", k, 3)))
		if err != nil {
			t.Fatal(err)
		}
		parts += st.Size()
	}
	args := []string{"--backend", filepath.Join(libs, "libQnnHtp.so"), "--system", filepath.Join(libs, "libQnnSystem.so"), "--json", dir}
	var stdout, stderr bytes.Buffer
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if code := inspect(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, &stderr)
	}
	runtime.ReadMemStats(&after)
	if alloc := int64(after.TotalAlloc - before.TotalAlloc); alloc > parts/2 {
		t.Errorf("inspect allocated %d bytes for %d bytes of parts", alloc, parts)
	} else {
		t.Logf("inspect allocated %d bytes for %d bytes of parts", alloc, parts)
	}
	testjson.Edit(t, filepath.Join(dir, genie.ConfigFile), func(m map[string]any) {
		m["dialog"].(map[string]any)["sampler"].(map[string]any)["temp"] = -1
	})
	stderr.Reset()
	if code := inspect(args, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "dialog.sampler.temp") {
		t.Errorf("a bundle serve refuses: exit %d, %s", code, &stderr)
	}
}
