package bundle

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hexserve/hexserve/internal/modelfile"
)

// goodManifest is the agreed example manifest, scaled down (vocab 16) so the
// embedding file stays small.
const goodManifest = `{
  "schema_version": 1,
  "model": {"name": "tinyllama-public", "family": "llama", "dsp_arch": "v79", "quant": "w8a16"},
  "params": {"hidden": 64, "vocab": 16, "n_layers": 2, "max_ctx": 512, "kv_dim": 32, "head_dim": 16,
             "rope_theta": 500000, "eos_token_id": 128009},
  "artifacts": {
    "contexts": {"prefill": {"bin": "prefill.bin"}, "decode": {"bin": "decode.bin"}, "lmhead": {"bin": "lmhead.bin"}},
    "embed": "embed_f16.bin",
    "tokenizer": "tokenizer.json"
  },
  "plan": {"params": {"prefill": "prefill", "decode": "decode", "lmhead": "lmhead"}},
  "chat": {"bos": 128000},
  "hexserve": {
    "contract": "qhexrt",
    "n_heads": 4, "n_kv_heads": 2, "prefill_window": 128, "rms_eps": 1e-5,
    "rope_scaling": {"rope_type": "llama3", "factor": 32, "low_freq_factor": 1, "high_freq_factor": 4,
                     "original_max_position_embeddings": 8192},
    "eos_token_ids": [128001, 128008, 128009],
    "mask": "additive",
    "tensors": {"x": "x", "cos": "cos", "sin": "sin", "cmask": "cmask", "y": "y",
                "past_k": "past_k_{i}", "past_v": "past_v_{i}", "new_k": "new_k_{i}", "new_v": "new_v_{i}"}
  },
  "future_key": {"kept": true}
}`

// makeBundle writes root/<arch>/<name> with the (edited) manifest and every
// file it names, and returns root.
func makeBundle(t *testing.T, arch, name string, edit func(doc map[string]any)) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(goodManifest), &doc); err != nil {
		t.Fatal(err)
	}
	doc["model"].(map[string]any)["dsp_arch"] = arch
	if edit != nil {
		edit(doc)
	}
	root := t.TempDir()
	dir := filepath.Join(root, arch)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"prefill.bin", "decode.bin", "lmhead.bin", "model.bin"} {
		write(f, []byte("HSIMCTX"))
	}
	write("embed_f16.bin", make([]byte, 16*64*2))
	write("tokenizer.json", []byte(`{"schema_version": "not a manifest"}`))
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	write(name, data)
	return root
}

func del(path ...string) func(map[string]any) {
	return func(doc map[string]any) {
		m := doc
		for _, k := range path[:len(path)-1] {
			m = m[k].(map[string]any)
		}
		delete(m, path[len(path)-1])
	}
}

func set(value any, path ...string) func(map[string]any) {
	return func(doc map[string]any) {
		m := doc
		for _, k := range path[:len(path)-1] {
			m = m[k].(map[string]any)
		}
		m[path[len(path)-1]] = value
	}
}

func TestReadGood(t *testing.T) {
	root := makeBundle(t, "v79", "manifest.json", nil)
	dir := filepath.Join(root, "v79")
	for _, path := range []string{root, dir, filepath.Join(dir, "manifest.json")} {
		b, err := Read(path, "v79")
		if err != nil {
			t.Fatalf("Read(%s): %v", path, err)
		}
		if b.Dir != dir || b.ManifestPath != filepath.Join(dir, "manifest.json") || b.Arch != "v79" {
			t.Errorf("Read(%s): dir %s manifest %s arch %s", path, b.Dir, b.ManifestPath, b.Arch)
		}
		if b.PrefillBin != filepath.Join(dir, "prefill.bin") || b.DecodeBin != filepath.Join(dir, "decode.bin") ||
			b.LMHeadBin != filepath.Join(dir, "lmhead.bin") || b.Embed != filepath.Join(dir, "embed_f16.bin") ||
			b.Tokenizer != filepath.Join(dir, "tokenizer.json") {
			t.Errorf("files: %+v", b)
		}
		want := Settings{
			Contract: "qhexrt", Mask: "additive", NHeads: 4, NKVHeads: 2, PrefillWindow: 128, RMSEps: 1e-5,
			RopeScaling: DefaultRopeScaling(), EOSTokenIDs: []int{128001, 128008, 128009}, BOS: 128000,
			Tensors: DefaultTensors(), Graphs: Graphs{Prefill: "prefill", Decode: "decode", LMHead: "lmhead"},
		}
		if !reflect.DeepEqual(b.Settings, want) {
			t.Errorf("settings:\n got %+v\nwant %+v", b.Settings, want)
		}
	}
	// Empty arch accepts whatever the bundle holds.
	if _, err := Read(root, ""); err != nil {
		t.Error(err)
	}
}

// TestReadSeedStyle: a QHexRT manifest with no hexserve key, a shared
// context and its own file name reads with every default.
func TestReadSeedStyle(t *testing.T) {
	root := makeBundle(t, "v79", "llama-3.2-1b.json", func(doc map[string]any) {
		delete(doc, "hexserve")
		delete(doc, "chat")
		doc["params"].(map[string]any)["eos_token_id"] = 128256 // not in the default set: appended
		doc["artifacts"].(map[string]any)["contexts"] = map[string]any{"shared": map[string]any{"bin": "model.bin"}}
		doc["plan"] = map[string]any{"params": map[string]any{"prefill": "ar128", "decode": "ar1", "lmhead": "head"}}
	})
	b, err := Read(root, "v79")
	if err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(root, "v79", "model.bin")
	if b.PrefillBin != shared || b.DecodeBin != shared || b.LMHeadBin != shared {
		t.Errorf("shared binary not used for every graph: %+v", b)
	}
	s := b.Settings
	if s.Contract != "qhexrt" || s.Mask != "additive" || s.NHeads != 4 || s.NKVHeads != 2 || s.PrefillWindow != 0 ||
		s.BOS != 128000 || s.RMSEps != 1e-5 || !reflect.DeepEqual(s.RopeScaling, DefaultRopeScaling()) || s.Tensors != DefaultTensors() {
		t.Errorf("defaults: %+v", s)
	}
	if !reflect.DeepEqual(s.EOSTokenIDs, []int{128001, 128008, 128009, 128256}) {
		t.Errorf("eos %v", s.EOSTokenIDs)
	}
	if s.Graphs != (Graphs{Prefill: "ar128", Decode: "ar1", LMHead: "head"}) {
		t.Errorf("graphs %+v", s.Graphs)
	}

	// Overrides supply what the manifest lacks.
	chunked, u16, win := "chunked", "u16", 64
	b, err = ReadWith(root, "v79", &Hexserve{Contract: &chunked, Mask: &u16, PrefillWindow: &win, Tensors: &Tensors{X: "input"}})
	if err != nil {
		t.Fatal(err)
	}
	if b.Settings.Contract != "chunked" || b.Settings.Mask != "u16" || b.Settings.PrefillWindow != 64 ||
		b.Settings.Tensors.X != "input" || b.Settings.Tensors.Y != "y" {
		t.Errorf("overrides: %+v", b.Settings)
	}
}

func TestReadBad(t *testing.T) {
	tests := []struct {
		name  string
		arch  string // bundle arch (default v79)
		want  string // device arch (default v79)
		edit  func(map[string]any)
		after func(root string)
		errs  []string // substrings of the error
	}{
		{name: "no schema_version", edit: del("schema_version"), errs: []string{"no manifest"}},
		{name: "schema 2", edit: set(2, "schema_version"), errs: []string{"schema_version 2"}},
		{name: "no dsp_arch", edit: del("model", "dsp_arch"), errs: []string{"missing key model.dsp_arch"}},
		{name: "no hidden", edit: del("params", "hidden"), errs: []string{"missing key params.hidden"}},
		{name: "no rope_theta", edit: del("params", "rope_theta"), errs: []string{"missing key params.rope_theta"}},
		{name: "no embed", edit: del("artifacts", "embed"), errs: []string{"missing key artifacts.embed"}},
		{name: "no tokenizer key", edit: del("artifacts", "tokenizer"), errs: []string{"missing key artifacts.tokenizer"}},
		{name: "no params", edit: del("params"), errs: []string{"missing key params"}},
		{name: "zero vocab", edit: set(0, "params", "vocab"), errs: []string{"params.vocab must be positive"}},
		{name: "no decode", edit: del("artifacts", "contexts", "decode"), errs: []string{`no "decode" or "shared"`}},
		{name: "empty bin", edit: set(map[string]any{}, "artifacts", "contexts", "lmhead"), errs: []string{"missing key artifacts.contexts.lmhead.bin"}},
		{name: "wrong arch in manifest", arch: "v75", want: "v79", errs: []string{"v75", "v79"}},
		{name: "manifest arch mismatch", want: "v79", edit: set("v81", "model", "dsp_arch"), errs: []string{"model.dsp_arch is v81", "device is v79"}},
		{name: "missing binary", after: rm("decode.bin"), errs: []string{"artifacts.contexts.decode.bin", "decode.bin"}},
		{name: "missing embed", after: rm("embed_f16.bin"), errs: []string{"artifacts.embed", "embed_f16.bin"}},
		{name: "missing tokenizer", after: rm("tokenizer.json"), errs: []string{"artifacts.tokenizer", "tokenizer.json"}},
		{name: "embed size", edit: set(17, "params", "vocab"), errs: []string{"artifacts.embed", "2048 bytes, want 2176"}},
		{name: "bad contract", edit: set("fused", "hexserve", "contract"), errs: []string{`hexserve.contract "fused"`}},
		{name: "bad mask", edit: set("bool", "hexserve", "mask"), errs: []string{`hexserve.mask "bool"`}},
		{name: "kv mismatch", edit: set(3, "hexserve", "n_kv_heads"), errs: []string{"n_heads 4 must be a positive multiple of n_kv_heads 3"}},
		{name: "kv_dim mismatch", edit: set(64, "params", "kv_dim"), errs: []string{"params.kv_dim 64"}},
		{name: "window too big", edit: set(1024, "hexserve", "prefill_window"), errs: []string{"prefill_window 1024"}},
		{name: "template", edit: set(map[string]any{"past_k": "past_k"}, "hexserve", "tensors"), errs: []string{"hexserve.tensors.past_k", "{i}"}},
		{name: "two manifests", after: func(root string) {
			data, _ := os.ReadFile(filepath.Join(root, "v79", "manifest.json"))
			os.WriteFile(filepath.Join(root, "v79", "other.json"), data, 0o644)
		}, errs: []string{"several manifests"}},
		{name: "bad json", after: func(root string) {
			os.WriteFile(filepath.Join(root, "v79", "manifest.json"), []byte(`{"schema_version": 1, "params": [}`), 0o644)
		}, errs: []string{"manifest.json is not valid JSON"}},
		{name: "type error", edit: set("big", "params", "hidden"), errs: []string{"manifest", "params.hidden"}},
		// Sizes are checked against sane limits before anything is allocated.
		{name: "a billion layers", edit: set(1e9, "params", "n_layers"), errs: []string{"params.n_layers is 1000000000, more than hexserve supports (1024)"}},
		{name: "2^31 context", edit: set(1<<31, "params", "max_ctx"), errs: []string{"params.max_ctx is 2147483648"}},
		{name: "huge vocab", edit: set(1<<30, "params", "vocab"), errs: []string{"params.vocab is 1073741824"}},
		{name: "huge hidden", edit: set(1<<20, "params", "hidden"), errs: []string{"params.hidden is 1048576"}},
		// Artifact paths stay inside the bundle folder.
		{name: "absolute embed", edit: set("/etc/passwd", "artifacts", "embed"), errs: []string{"artifacts.embed", `"/etc/passwd" is outside the model's folder`}},
		{name: "dotdot tokenizer", edit: set("../../../etc/passwd", "artifacts", "tokenizer"), errs: []string{"artifacts.tokenizer", "../../../etc/passwd", "outside the model's folder"}},
		{name: "dotdot binary", edit: set(map[string]any{"bin": "sub/../../decode.bin"}, "artifacts", "contexts", "decode"), errs: []string{"artifacts.contexts.decode.bin", "outside the model's folder"}},
		// Only regular files are read: a device never ends.
		{name: "tokenizer is /dev/zero", after: link("tokenizer.json", "/dev/zero"), errs: []string{"artifacts.tokenizer", "not a regular file (a device)"}},
		{name: "binary is a folder", after: func(root string) {
			rm("decode.bin")(root)
			os.Mkdir(filepath.Join(root, "v79", "decode.bin"), 0o755)
		}, errs: []string{"artifacts.contexts.decode.bin", "not a regular file (a folder)"}},
		{name: "manifest is a FIFO", after: func(root string) {
			rm("manifest.json")(root)
			if err := syscall.Mkfifo(filepath.Join(root, "v79", "manifest.json"), 0o644); err != nil {
				panic(err)
			}
		}, errs: []string{"manifest.json: not a regular file (a named pipe)"}},
		{name: "manifest too large", after: func(root string) {
			os.WriteFile(filepath.Join(root, "v79", "manifest.json"), make([]byte, modelfile.MaxConfig+1), 0o644)
		}, errs: []string{"manifest.json: too large: 4194305 bytes, more than the 4194304 allowed"}},
		// What really happened, not "holds no manifest".
		{name: "symlink loop arch folder", after: func(root string) {
			os.RemoveAll(filepath.Join(root, "v79"))
			os.Symlink("v79", filepath.Join(root, "v79"))
		}, errs: []string{"too many levels of symbolic links"}},
		{name: "symlink loop manifest", after: link("manifest.json", "manifest.json"), errs: []string{"too many levels of symbolic links"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			arch, want := tt.arch, tt.want
			if arch == "" {
				arch = "v79"
			}
			if want == "" {
				want = "v79"
			}
			root := makeBundle(t, arch, "manifest.json", tt.edit)
			if tt.after != nil {
				tt.after(root)
			}
			_, err := Read(root, want)
			if err == nil {
				t.Fatal("no error")
			}
			t.Log(err)
			for _, s := range tt.errs {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
}

// link replaces the arch folder's name with a symbolic link to target.
func link(name, target string) func(string) {
	return func(root string) {
		p := filepath.Join(root, "v79", name)
		os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			panic(err)
		}
	}
}

// TestReadUnreadable: a folder or manifest the server may not read is
// reported as permission denied, not as a bundle without a manifest.
func TestReadUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files whatever their mode")
	}
	for _, target := range []string{"", "v79", "v79/manifest.json"} {
		t.Run("chmod 0 "+target, func(t *testing.T) {
			root := makeBundle(t, "v79", "manifest.json", nil)
			p := filepath.Join(root, target)
			if err := os.Chmod(p, 0); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(p, 0o755) })
			_, err := Read(root, "v79")
			if err == nil || !strings.Contains(err.Error(), "permission denied") || strings.Contains(err.Error(), "no manifest") {
				t.Fatalf("err = %v, want permission denied", err)
			}
		})
	}
}

// TestResolveDevice: --bundle /dev/zero is refused at once instead of being
// read without end.
func TestResolveDevice(t *testing.T) {
	done := make(chan error, 1)
	go func() { _, err := Read("/dev/zero", "v79"); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "neither a bundle folder nor a manifest file: /dev/zero: not a regular file (a device)") {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read(/dev/zero) did not return")
	}
}

func rm(name string) func(string) {
	return func(root string) { os.Remove(filepath.Join(root, "v79", name)) }
}

func TestResolveArchFolders(t *testing.T) {
	root := t.TempDir()
	for _, a := range []string{"v75", "v81"} {
		os.MkdirAll(filepath.Join(root, a), 0o755)
	}
	_, _, err := Resolve(root, "v79")
	if err == nil || !strings.Contains(err.Error(), "v75, v81") || !strings.Contains(err.Error(), "device is v79") {
		t.Errorf("err = %v", err)
	}
	_, _, err = Resolve(root, "")
	if err == nil || !strings.Contains(err.Error(), "several arch folders") {
		t.Errorf("err = %v", err)
	}
	if _, _, err := Resolve(filepath.Join(root, "nope"), "v79"); err == nil {
		t.Error("missing path: no error")
	}
}

func TestWriteRoundTrip(t *testing.T) {
	var m Manifest
	if err := json.Unmarshal([]byte(goodManifest), &m); err != nil {
		t.Fatal(err)
	}
	if string(m.Extra["future_key"]) != `{"kept": true}` || string(m.Model.Extra["quant"]) != `"w8a16"` {
		t.Fatalf("unknown keys not kept: %v %v", m.Extra, m.Model.Extra)
	}
	dir := t.TempDir()
	if err := Write(dir, &m); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	var back Manifest
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	// Compare as generic JSON: the unknown keys survive, nothing is added.
	// chat.bos is written in QHexRT's array form.
	var a, b map[string]any
	json.Unmarshal([]byte(goodManifest), &a)
	a["chat"] = map[string]any{"bos": []any{128000.0}}
	json.Unmarshal(data, &b)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("round trip changed the manifest:\n%s", data)
	}
	if back.Hexserve == nil || *back.Hexserve.Contract != "qhexrt" || back.Params.EOSTokenID[0] != 128009 {
		t.Errorf("back: %+v", back)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("Write left %d files", len(entries))
	}
}

func TestMerge(t *testing.T) {
	q, c := "qhexrt", "chunked"
	five := 5
	base := &Hexserve{Contract: &q, NHeads: &five, Tensors: &Tensors{X: "a", Y: "b"}}
	got := base.Merge(&Hexserve{Contract: &c, Tensors: &Tensors{Y: "z"}, EOSTokenIDs: []int{1}})
	if *got.Contract != "chunked" || *got.NHeads != 5 || got.Tensors.X != "a" || got.Tensors.Y != "z" || got.EOSTokenIDs[0] != 1 {
		t.Errorf("merge: %+v %+v", got, got.Tensors)
	}
	if base.Tensors.Y != "b" || *base.Contract != "qhexrt" {
		t.Error("merge modified its receiver")
	}
	var none *Hexserve
	if m := none.Merge(nil); m == nil || m.Contract != nil {
		t.Errorf("nil merge: %+v", m)
	}
}

func TestChatBOS(t *testing.T) {
	for _, c := range []struct {
		in    string
		bos   int // -1: missing
		extra string
	}{
		{`{"bos": 128000}`, 128000, ""},
		{`{"bos": [128000, 5]}`, 128000, ""},
		{`{"bos": [], "template": "llama3"}`, -1, "template"},
		{`{}`, -1, ""},
	} {
		var ch Chat
		if err := json.Unmarshal([]byte(c.in), &ch); err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		got := -1
		if ch.BOS != nil {
			got = *ch.BOS
		}
		if _, ok := ch.Extra[c.extra]; got != c.bos || (c.extra != "" && !ok) {
			t.Errorf("%s: bos %d extra %v", c.in, got, ch.Extra)
		}
		out, _ := json.Marshal(ch)
		var back Chat
		if err := json.Unmarshal(out, &back); err != nil || (back.BOS == nil) != (ch.BOS == nil) {
			t.Errorf("%s: round trip %s: %v", c.in, out, err)
		}
		if ch.BOS != nil && !strings.Contains(string(out), `"bos":[`) {
			t.Errorf("%s: bos not written as an array: %s", c.in, out)
		}
	}
	if err := json.Unmarshal([]byte(`{"bos": "x"}`), new(Chat)); err == nil {
		t.Error("string bos: no error")
	}
}
