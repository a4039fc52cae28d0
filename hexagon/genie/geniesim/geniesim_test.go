package geniesim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// keys lists every key path of a JSON value.
func keys(prefix string, v any, out *[]string) {
	if m, ok := v.(map[string]any); ok {
		for k, c := range m {
			*out = append(*out, prefix+k)
			keys(prefix+k+".", c, out)
		}
	}
	if a, ok := v.([]any); ok && len(a) > 0 {
		keys(prefix+"[]", a[0], out)
	}
}

func keySet(t *testing.T, b []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var ks []string
	keys("", v, &ks)
	slices.Sort(ks)
	return ks
}

// TestPublishedSchema: the bundle's genie_config.json and htp_backend_ext_config.json have
// exactly the keys of AI Hub's published files (../testdata), with this model's values.
func TestPublishedSchema(t *testing.T) {
	dir := t.TempDir()
	c := tinyllama.Tiny()
	err := Write(dir, Options{Config: c, Name: "tiny", Precision: "w4a16", Weights: simfile.WeightInt8, Parts: 3, PromptAR: 8, Ctx: 64})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range [][2]string{{"genie_config.json", "llama_v3_2_1b_instruct.genie_config.json"}, {"htp_backend_ext_config.json", "htp_backend_ext_config.json"}} {
		ours, err := os.ReadFile(filepath.Join(dir, f[0]))
		if err != nil {
			t.Fatal(err)
		}
		pub, err := os.ReadFile(filepath.Join("..", "testdata", f[1]))
		if err != nil {
			t.Fatal(err)
		}
		if a, b := keySet(t, ours), keySet(t, pub); !slices.Equal(a, b) {
			t.Errorf("%s keys:\n ours      %v\n published %v", f[0], a, b)
		}
	}
	var g struct {
		Dialog struct {
			Context struct {
				Size   int `json:"size"`
				NVocab int `json:"n-vocab"`
			} `json:"context"`
			Engine struct {
				Backend struct {
					QnnHtp struct {
						KVDim int `json:"kv-dim"`
					} `json:"QnnHtp"`
				} `json:"backend"`
				Model struct {
					Binary struct {
						CtxBins []string `json:"ctx-bins"`
					} `json:"binary"`
					PE struct {
						RopeDim int `json:"rope-dim"`
					} `json:"positional-encoding"`
				} `json:"model"`
			} `json:"engine"`
		} `json:"dialog"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "genie_config.json"))
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	d := g.Dialog
	if d.Context.Size != 64 || d.Context.NVocab != c.VocabSize || d.Engine.Backend.QnnHtp.KVDim != c.HeadDim ||
		d.Engine.Model.PE.RopeDim != c.HeadDim/2 ||
		!slices.Equal(d.Engine.Model.Binary.CtxBins, []string{"tiny_part_1_of_3.bin", "tiny_part_2_of_3.bin", "tiny_part_3_of_3.bin"}) {
		t.Errorf("values %+v", d)
	}
	for _, f := range d.Engine.Model.Binary.CtxBins {
		fr, err := os.Open(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		sf, err := simfile.Read(fr)
		fr.Close()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, gr := range sf.Graphs {
			names = append(names, gr.Name)
		}
		k := strings.TrimSuffix(strings.TrimPrefix(f, "tiny_part_"), ".bin")
		if want := []string{"prompt_ar8_cl64_" + k, "token_ar1_cl64_" + k}; !slices.Equal(names, want) {
			t.Errorf("%s holds graphs %v, want %v", f, names, want)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "metadata.yaml"))
	for _, w := range []string{"prompt_1_of_3:", "token_3_of_3:", "past_key_1_in:", "quantization_parameters:", "zero_point: 128", "dtype: uint8", "dtype: uint16"} {
		if !strings.Contains(string(md), w) {
			t.Errorf("metadata.yaml lacks %q", w)
		}
	}
}
