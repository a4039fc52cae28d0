package genie

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hexserve/hexserve/hexagon/genie/geniesim"
	"github.com/hexserve/hexserve/internal/costtest"
	"github.com/hexserve/hexserve/internal/testerr"
)

// TestHostileBundles (issue 55): a bundle's folder is input too. Each bad file (a FIFO, /dev/zero,
// 100 MB, outside the folder) as the config, the extensions, the tokenizer or a part, each bad
// size (context 2^30 and 4M, 1,000 parts, parts or KV over engine.model_memory) and each bad
// setting of the bundle's own is refused at load within 5 s, naming the field and the file.
func TestHostileBundles(t *testing.T) {
	costtest.SkipNumericUnderRace(t, "writes a bundle per hostile case")
	rt := openRuntime(t)
	part := geniesim.PartFile("tiny", 2, 3)
	fifo := func(t *testing.T, dir, name string) {
		os.Remove(filepath.Join(dir, name))
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	devZero := func(t *testing.T, dir, name string) {
		os.Remove(filepath.Join(dir, name))
		if err := os.Symlink("/dev/zero", filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	huge := func(t *testing.T, dir, name string) {
		if err := os.Truncate(filepath.Join(dir, name), 100<<20); err != nil {
			t.Fatal(err)
		}
	}
	outside := func(t *testing.T, dir, name string) string {
		out := filepath.Join(t.TempDir(), name)
		if err := os.Rename(filepath.Join(dir, name), out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	const (
		bins = "dialog.engine.model.binary.ctx-bins"
		htp  = "dialog.engine.backend.QnnHtp"
		pe   = "dialog.engine.model.positional-encoding"
	)
	hf := func(body string) func(*testing.T, string) {
		return func(t *testing.T, dir string) { os.WriteFile(filepath.Join(dir, "config.json"), []byte(body), 0o644) }
	}
	for _, tc := range []struct {
		name  string
		edit  func(t *testing.T, dir string)
		cfg   func(*Config)
		want  []string
		allow bool   // opens (with the cfg)
		lacks string // the error does not say
	}{
		{name: "config FIFO", edit: func(t *testing.T, d string) { fifo(t, d, ConfigFile) }, want: []string{ConfigFile, "a named pipe"}},
		{name: "config /dev/zero", edit: func(t *testing.T, d string) { devZero(t, d, ConfigFile) }, want: []string{ConfigFile, "a device"}},
		{name: "config 100 MB", edit: func(t *testing.T, d string) { huge(t, d, ConfigFile) }, want: []string{ConfigFile, "104857600 bytes, more than the 4194304 allowed"}},
		{name: "extensions FIFO", edit: func(t *testing.T, d string) { fifo(t, d, "htp_backend_ext_config.json") }, want: []string{"dialog.engine.backend.extensions", "a named pipe"}},
		{name: "extensions /dev/zero", edit: func(t *testing.T, d string) { devZero(t, d, "htp_backend_ext_config.json") }, want: []string{"dialog.engine.backend.extensions", "a device"}},
		{name: "extensions 100 MB", edit: func(t *testing.T, d string) { huge(t, d, "htp_backend_ext_config.json") }, want: []string{"dialog.engine.backend.extensions", "more than the 4194304 allowed"}},
		{name: "extensions outside", edit: func(t *testing.T, d string) {
			editConfig(t, d, "dialog.engine.backend.extensions", outside(t, d, "htp_backend_ext_config.json"))
		}, want: []string{"dialog.engine.backend.extensions", "outside the model's folder", "model.allow_outside_paths"}},
		{name: "tokenizer FIFO", edit: func(t *testing.T, d string) { fifo(t, d, "tokenizer.json") }, want: []string{"dialog.tokenizer.path", "a named pipe"}},
		{name: "tokenizer /dev/zero", edit: func(t *testing.T, d string) { devZero(t, d, "tokenizer.json") }, want: []string{"dialog.tokenizer.path", "a device"}},
		{name: "tokenizer 100 MB", edit: func(t *testing.T, d string) { huge(t, d, "tokenizer.json") }, want: []string{"dialog.tokenizer.path", "more than the 67108864 allowed"}},
		{name: "tokenizer outside", edit: func(t *testing.T, d string) {
			editConfig(t, d, "dialog.tokenizer.path", "../tokenizer.json")
		}, want: []string{"dialog.tokenizer.path", "outside the model's folder"}},
		{name: "part FIFO", edit: func(t *testing.T, d string) { fifo(t, d, part) }, want: []string{bins + "[1]", "a named pipe"}},
		{name: "part /dev/zero", edit: func(t *testing.T, d string) { devZero(t, d, part) }, want: []string{bins + "[1]", "a device"}},
		{name: "part 100 MB over the budget", edit: func(t *testing.T, d string) { huge(t, d, part) },
			cfg: func(c *Config) { c.Memory = 50 << 20 }, want: []string{"parts (", "more than the budget of"}},
		{name: "part outside", edit: func(t *testing.T, d string) {
			editConfig(t, d, bins, []any{geniesim.PartFile("tiny", 1, 3), outside(t, d, part), geniesim.PartFile("tiny", 3, 3)})
		}, want: []string{bins + "[1]", "outside the model's folder"}},
		{name: "part outside, allowed and counted", edit: func(t *testing.T, d string) {
			out := outside(t, d, part)
			huge(t, filepath.Dir(out), part)
			editConfig(t, d, bins, []any{geniesim.PartFile("tiny", 1, 3), out, geniesim.PartFile("tiny", 3, 3)})
		}, cfg: func(c *Config) { c.AllowOutside, c.Memory = true, 50<<20 }, want: []string{"more than the budget of"}},
		{name: "KV cache over the budget", cfg: func(c *Config) {
			for k := 1; k <= 3; k++ { // the parts fit exactly, their KV cache and I/O do not
				st, _ := os.Stat(filepath.Join(c.Dir, geniesim.PartFile("tiny", k, 3)))
				c.Memory += st.Size()
			}
		}, want: []string{"KV cache (", "more than the budget of"}, lacks: "KV cache (0)"},
		{name: "1000 parts", edit: func(t *testing.T, d string) {
			many := make([]any, 1000)
			for i := range many {
				many[i] = geniesim.PartFile("tiny", i%3+1, 3)
			}
			editConfig(t, d, bins, many)
		}, want: []string{bins, "1000 entries, more than hexserve supports (64)"}},
		{name: "context 2^30", edit: func(t *testing.T, d string) { editConfig(t, d, "dialog.context.size", 1<<30) },
			want: []string{"dialog.context.size", "1073741824 is more than hexserve supports (131072)"}},
		{name: "context 4M", edit: func(t *testing.T, d string) { editConfig(t, d, "dialog.context.size", 4<<20) },
			want: []string{"dialog.context.size", "4194304 is more than"}},
		{name: "sampler temp -1", edit: func(t *testing.T, d string) { editConfig(t, d, "dialog.sampler.temp", -1) },
			want: []string{"dialog.sampler.temp", "-1 is outside 0…2"}},
		{name: "sampler top-p 7", edit: func(t *testing.T, d string) { editConfig(t, d, "dialog.sampler.top-p", 7) },
			want: []string{"dialog.sampler.top-p", "7 is outside 0…1"}},
		{name: "rope-theta 1e-300", edit: func(t *testing.T, d string) { editConfig(t, d, pe+".rope-theta", 1e-300) },
			want: []string{pe + ".rope-theta", "1e-300 is outside"}},
		{name: "rope-theta 1e308", edit: func(t *testing.T, d string) { editConfig(t, d, pe+".rope-theta", 1e308) },
			want: []string{pe + ".rope-theta", "1e+308 is outside"}},
		{name: "rope-scaling factor 1e308", edit: func(t *testing.T, d string) { editConfig(t, d, pe+".rope-scaling.factor", 1e308) },
			want: []string{pe + ".rope-scaling.factor", "factor 1e+308"}},
		{name: "config.json rope factor 1e308", edit: hf(`{"model_type":"llama","rope_scaling":{"rope_type":"llama3","factor":1e308,"low_freq_factor":1,"high_freq_factor":4,"original_max_position_embeddings":8192}}`),
			want: []string{"config.json", "rope_scaling", "factor 1e+308"}},
		{name: "config.json rope_theta 1e308", edit: hf(`{"model_type":"llama","rope_theta":1e308}`), want: []string{"config.json", "rope_theta", "1e+308 is outside"}},
		{name: "spill-fill 2^62", edit: func(t *testing.T, d string) { editConfig(t, d, htp+".spill-fill-bufsize", int64(1)<<62) },
			want: []string{htp + ".spill-fill-bufsize", "4611686018427387904 bytes is outside 0…8589934592"}},
		{name: "mmap-budget 2^62", edit: func(t *testing.T, d string) { editConfig(t, d, htp+".mmap-budget", int64(1)<<62) },
			want: []string{htp + ".mmap-budget", "is outside 0…65536"}},
		{name: "trailing bytes", edit: func(t *testing.T, d string) {
			f, _ := os.OpenFile(filepath.Join(d, ConfigFile), os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString(`{"dialog":{}}`)
			f.Close()
		}, want: []string{ConfigFile, "bytes after the JSON value"}},
		{name: "config.json trailing bytes", edit: hf(`{"model_type":"llama"} x`), want: []string{"config.json", "bytes after the JSON value"}},
		{name: "Llama4 architectures", edit: hf(`{"architectures":["Llama4ForConditionalGeneration"]}`),
			want: []string{"config.json", "architectures[0]", `"Llama4ForConditionalGeneration"`}},
		{name: "JSON type words", edit: hf(`{"model_type":["llama"]}`), want: []string{"config.json", "model_type: got an array, want a string"}},
		{name: "JSON type words, nested", edit: func(t *testing.T, d string) { editConfig(t, d, "dialog.context", []any{1}) },
			want: []string{ConfigFile, "dialog.context: got an array, want an object"}},
		{name: "allowed outside, within the budget", edit: func(t *testing.T, d string) {
			editConfig(t, d, bins, []any{geniesim.PartFile("tiny", 1, 3), outside(t, d, part), geniesim.PartFile("tiny", 3, 3)})
		}, cfg: func(c *Config) { c.AllowOutside = true }, allow: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeBundle(t, "f32", 3)
			if tc.edit != nil {
				tc.edit(t, dir)
			}
			cfg := Config{Dir: dir, Runtime: rt}
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			done := make(chan error, 1)
			go func() {
				r, err := Open(cfg)
				if err == nil {
					r.Close()
				}
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Open did not return within 5 s")
			}
			if tc.allow {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("opened")
			}
			testerr.Mentions(t, err, tc.want...)
			if tc.lacks != "" && strings.Contains(err.Error(), tc.lacks) {
				t.Errorf("error %q says %q", err, tc.lacks)
			}
			for _, goName := range []string{"Go value", "struct {", "float64", "int64"} {
				if strings.Contains(err.Error(), goName) {
					t.Errorf("error %q speaks Go (%q)", err, goName)
				}
			}
		})
	}
}
