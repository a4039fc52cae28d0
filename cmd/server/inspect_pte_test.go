package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/hexagon/pte"
	"github.com/hexserve/hexserve/hexagon/pte/ptewrite"
)

const realPTE = "../../hexagon/pte/testdata/stories260k_hybrid_llama_qnn.pte"

func TestInspectPTEReal(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := inspect([]string{"--json", realPTE}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, &stderr)
	}
	dec := json.NewDecoder(&stdout)
	dec.UseNumber()
	var got struct {
		Methods []struct {
			Name      string
			Delegates []struct {
				Backend       string
				Segment       *int           `json:"segment"`
				PayloadOffset json.Number    `json:"payload_offset"`
				BinaryOffset  json.Number    `json:"context_binary_offset"`
				BinarySize    json.Number    `json:"context_binary_size"`
				Signature     json.Number    `json:"signature"`
				CompileSpec   map[string]any `json:"compile_spec"`
			}
		}
		Metadata map[string]any
		Contexts []struct {
			Methods     []string
			Graphs      []inspectedGraph
			Unavailable string `json:"tensors_unavailable"`
		}
	}
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if len(got.Methods) != 2 || got.Methods[0].Name != "kv_forward" || got.Methods[1].Name != "prefill_forward" {
		t.Fatalf("methods %+v, want kv_forward and prefill_forward", got.Methods)
	}
	for _, m := range got.Methods {
		if len(m.Delegates) != 1 {
			t.Fatalf("%s: %d delegates", m.Name, len(m.Delegates))
		}
		d := m.Delegates[0]
		if d.Backend != "QnnBackend" || d.Segment == nil || *d.Segment != 1 || d.PayloadOffset != "18688" ||
			d.BinaryOffset != "18944" || d.BinarySize != "1331200" || d.Signature != "1780651886543080982" {
			t.Errorf("%s delegate %+v", m.Name, d)
		}
		for k, v := range map[string]any{"soc_model": "SM8650", "htp_arch": "V75", "performance_mode": "kHtpBurst",
			"max_sf_buf_size": json.Number("0"), "use_multi_contexts": false, "use_weight_sharing": false, "shared_buffer": false} {
			if d.CompileSpec[k] != v {
				t.Errorf("%s compile spec %s = %v, want %v", m.Name, k, d.CompileSpec[k], v)
			}
		}
	}
	for k, v := range map[string]string{"get_vocab_size": "512", "get_n_layers": "5", "get_max_context_len": "128",
		"get_logits_scale": "0.0006798750255256891", "get_logits_zero_point": "31143"} {
		if n, ok := got.Metadata[k].(json.Number); !ok || string(n) != v {
			t.Errorf("metadata %s = %v, want %s", k, got.Metadata[k], v)
		}
	}
	if q, ok := got.Metadata["get_kv_output_0_quant_attr"].([]any); !ok || len(q) != 5 || q[4] != "torch.uint8" {
		t.Errorf("metadata get_kv_output_0_quant_attr = %v", got.Metadata["get_kv_output_0_quant_attr"])
	}
	// Only Qualcomm's libQnnSystem reads the real context binary.
	if len(got.Contexts) != 1 || len(got.Contexts[0].Graphs) != 0 || got.Contexts[0].Unavailable == "" ||
		strings.Join(got.Contexts[0].Methods, ",") != "kv_forward,prefill_forward" {
		t.Errorf("contexts %+v, want one shared context with no tensors and a reason", got.Contexts)
	}

	stdout.Reset()
	if code := inspect([]string{realPTE}, &stdout, &stderr); code != 0 {
		t.Fatalf("text: exit %d: %s", code, &stderr)
	}
	for _, want := range []string{"signature 1780651886543080982", "soc SM8650, htp V75", "kHtpBurst",
		"get_vocab_size              512", "tensors unavailable: "} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, &stdout)
		}
	}
}

// A .pte around a hostsim context binary: hostsim's libQnnSystem reads it,
// so inspect lists the graphs' tensors.
func TestInspectPTEHostsimGraphs(t *testing.T) {
	bin, err := os.ReadFile(filepath.Join("..", "..", "build", "models", "tiny", "v79", "decode.bin"))
	if err != nil {
		t.Skipf("needs the tiny model (`make models`): %v", err)
	}
	libs := hostsimLibDir(t)
	opts := pte.HTPOptions(pte.SM8750, pte.V79)
	method := func(name string) ptewrite.Method {
		return ptewrite.Method{Name: name, Values: []pte.Value{pte.TensorValue(pte.Int, 1, 1)}, Inputs: []int32{0},
			Instructions: []pte.Instruction{{Kind: pte.DelegateCall, Args: []int32{0}}},
			Delegates:    []ptewrite.Delegate{{Context: 0, Options: opts}}}
	}
	var b bytes.Buffer
	if err := ptewrite.Write(&b, ptewrite.Program{Methods: []ptewrite.Method{method(pte.MethodPrefill), method(pte.MethodDecode)},
		Contexts: []ptewrite.Context{{Binary: bin}}}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny.pte")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := inspect([]string{"--json", "--backend", filepath.Join(libs, "libQnnHtp.so"), "--system", filepath.Join(libs, "libQnnSystem.so"), path}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, &stderr)
	}
	var got struct{ Contexts []inspectedContext }
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Contexts) != 1 || got.Contexts[0].Unavailable != "" || len(got.Contexts[0].Graphs) == 0 {
		t.Fatalf("contexts %+v, want the hostsim graphs", got.Contexts)
	}
	g := got.Contexts[0].Graphs[0]
	if len(g.Inputs) == 0 || len(g.Outputs) == 0 || g.Inputs[0].Name == "" {
		t.Errorf("graph %+v has no tensors", g)
	}
}

func TestInspectPTECorrupt(t *testing.T) {
	raw, err := os.ReadFile(realPTE)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cut.pte")
	if err := os.WriteFile(path, raw[:20000], 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := inspect([]string{path}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), path) || !strings.Contains(stderr.String(), "segment_data_size") {
		t.Errorf("stderr %q does not name the file and the size mismatch", &stderr)
	}
}
