package qnn

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestHostsimRegistrationKinds checks one registration kind per allocation:
// an Alloc buffer is registered once per context and reused by later Calls,
// is taken at offset 0 only and with one shape; AllocPool views register
// one by one.
func TestHostsimRegistrationKinds(t *testing.T) {
	dir := hostsimDir(t)
	h := openHostsimLib(t, dir)
	m := newLMHeadModel(8, 16) // x [1 8], logits [1 16], float32
	path := m.write(t, t.TempDir())
	r := openRuntime(t, hostsimConfig(dir), h)
	ctx := loadContext(t, r, path)
	g := graph(t, ctx, "lmhead")
	alloc := func(pool bool, n int) *Buffer {
		t.Helper()
		f := r.Alloc
		if pool {
			f = r.AllocPool
		}
		b, err := f(n)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	x, y := alloc(false, 64), alloc(false, 64)
	c1, err := g.Bind([]Binding{{Name: "x", Buffer: x}}, []Binding{{Name: "logits", Buffer: y}})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := g.Bind([]Binding{{Name: "x", Buffer: x}}, []Binding{{Name: "logits", Buffer: y}})
	if err != nil {
		t.Fatalf("a second Call over the same buffers: %v", err)
	}
	if s := h.Stats(t); s.LiveMems != 2 {
		t.Errorf("%d registrations for two Calls over two buffers, want 2 (the second Call reuses them)", s.LiveMems)
	}
	for _, tc := range []struct {
		name   string
		in     []Binding
		out    []Binding
		errSub string
	}{
		{"offset in an Alloc buffer", []Binding{{Name: "x", Buffer: alloc(false, 4096), Offset: 64}}, []Binding{{Name: "logits", Buffer: alloc(false, 64)}},
			`input "x" is bound at offset 64 of a buffer from Alloc`},
		// x's buffer is registered as [1 8]; as logits it would be [1 16].
		{"another shape of an Alloc buffer", []Binding{{Name: "x", Buffer: alloc(false, 64)}}, []Binding{{Name: "logits", Buffer: x}},
			`output "logits": its buffer (from Alloc) is already registered in this context as FLOAT_32 [1 8]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := g.Bind(tc.in, tc.out); err == nil || !strings.Contains(err.Error(), tc.errSub) {
				t.Errorf("Bind: %v, want an error containing %q", err, tc.errSub)
			}
		})
	}
	// A pool viewed at two offsets, then the same region with the other
	// tensor's shape: three shared-buffer registrations of one fd.
	p := alloc(true, 128)
	before := h.Stats(t).LiveMems
	if _, err := g.Bind([]Binding{{Name: "x", Buffer: p}}, []Binding{{Name: "logits", Buffer: p, Offset: 64}}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Bind([]Binding{{Name: "x", Buffer: p, Offset: 64}}, []Binding{{Name: "logits", Buffer: p, Offset: 64}}); err != nil {
		t.Fatal(err)
	}
	if n := h.Stats(t).LiveMems - before; n != 3 {
		t.Errorf("%d registrations for views (0, [1 8]), (64, [1 16]), (64, [1 8]) of one pool, want 3", n)
	}
	c1.Close()
	c2.Close()
}

// TestHostsimRegisterFallback has hostsim refuse every registration: Bind
// passes the tensors as client buffers, logs one warning per tensor naming
// it and the error, and the results are the registered path's.
func TestHostsimRegisterFallback(t *testing.T) {
	dir := hostsimDir(t)
	h := openHostsimLib(t, dir)
	h.Set(t, "HOSTSIM_FAIL_MEM_REGISTER", "8003")
	var logs bytes.Buffer
	lg := zerolog.New(&logs)
	cfg := hostsimConfig(dir)
	cfg.Logger = &lg
	r := openRuntime(t, cfg, h)
	m := newLMHeadModel(8, 16)
	call, x, y := lmheadCall(t, r, m)
	xs := []float32{1, -2, 3, 0.5, 0, -1, 2, 1}
	putF32(x.Bytes(), xs)
	if err := call.Execute(); err != nil {
		t.Fatal(err)
	}
	for i, w := range m.logits(xs) {
		if g := getF32(y.Bytes(), m.V)[i]; g != w {
			t.Fatalf("logits[%d] = %g, want %g", i, g, w)
		}
	}
	if s := h.Stats(t); s.LiveMems != 0 {
		t.Errorf("%d registrations with memRegister refused", s.LiveMems)
	}
	// A second Call over the same buffers neither retries nor logs again.
	g, _ := call.g.ctx.Graph("lmhead")
	if _, err := g.Bind([]Binding{{Name: "x", Buffer: x}}, []Binding{{Name: "logits", Buffer: y}}); err != nil {
		t.Fatal(err)
	}
	var warns []string
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(l, "shared-memory registration failed") {
			warns = append(warns, l)
		}
	}
	if len(warns) != 2 {
		t.Fatalf("%d registration warnings, want 2 (one per tensor):\n%s", len(warns), logs.String())
	}
	for i, name := range []string{`input \"x\"`, `output \"logits\"`} {
		if !strings.Contains(warns[i], name) || !strings.Contains(warns[i], "8003") || !strings.Contains(warns[i], `"level":"warn"`) {
			t.Errorf("warning %d %s does not name %s, the error 8003 and level warn", i, warns[i], name)
		}
	}
}

// TestHostsimDeviceUnsupported: a deviceCreate answer of
// QNN_DEVICE_ERROR_UNSUPPORTED_FEATURE goes on without a device handle.
func TestHostsimDeviceUnsupported(t *testing.T) {
	dir := hostsimDir(t)
	h := openHostsimLib(t, dir)
	h.Set(t, "HOSTSIM_DEVICE_UNSUPPORTED", "1")
	cfg := hostsimConfig(dir)
	cfg.PerfMode = PerfBurst
	r, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s := h.Stats(t); s.LiveDevices != 0 || r.device != 0 {
		t.Errorf("%d live devices, handle %#x; want none", s.LiveDevices, r.device)
	}
	call, _, _ := lmheadCall(t, r, newLMHeadModel(8, 16))
	if err := call.Execute(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	checkNoLeaks(t, h)
}

// TestHostsimADSPLibraryPath: with HOSTSIM_REQUIRE_SKEL hostsim's
// deviceCreate fails like a phone's (14001) unless the skel is in a folder
// of ADSP_LIBRARY_PATH. Unset, Open sets it to the libraries' folder plus
// the system DSP folders; model.adsp_library_path overrides it; the error
// names the variable.
func TestHostsimADSPLibraryPath(t *testing.T) {
	dir := hostsimDir(t)
	h := openHostsimLib(t, dir)
	h.Set(t, "HOSTSIM_REQUIRE_SKEL", "1")
	libs, empty := t.TempDir(), t.TempDir()
	for _, lib := range []string{"libQnnHtp.so", "libQnnSystem.so"} {
		if err := os.Symlink(filepath.Join(dir, lib), filepath.Join(libs, lib)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := hostsimConfig(dir)
	cfg.Backend, cfg.System = filepath.Join(libs, "libQnnHtp.so"), filepath.Join(libs, "libQnnSystem.so")
	open := func(adsp string) (string, error) {
		t.Helper()
		t.Setenv("ADSP_LIBRARY_PATH", "")
		var logs bytes.Buffer
		lg := zerolog.New(&logs)
		c := cfg
		c.Logger, c.ADSPLibraryPath = &lg, adsp
		r, err := Open(c)
		if err == nil {
			err = r.Close()
		}
		return logs.String(), err
	}
	wantDefault := libs + ";/vendor/lib/rfsa/adsp;/vendor/dsp/cdsp;/system/lib/rfsa/adsp;/dsp"
	logs, err := open("")
	if err == nil || CodeOf(err) != CodeDeviceInvalidConfig || !strings.Contains(err.Error(), `ADSP_LIBRARY_PATH="`+wantDefault+`"`) ||
		!strings.Contains(err.Error(), "libQnnHtpV79Skel.so") {
		t.Fatalf("Open without a skel: %v; want 14001 naming ADSP_LIBRARY_PATH=%q and the skel", err, wantDefault)
	}
	if !strings.Contains(logs, `"ADSP_LIBRARY_PATH":"`+wantDefault+`","from":"default"`) {
		t.Errorf("the default is not logged: %s", logs)
	}
	if err := os.WriteFile(filepath.Join(libs, "libQnnHtpV79Skel.so"), []byte("skel"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := open(""); err != nil {
		t.Fatalf("Open with the skel next to libQnnHtp.so: %v", err)
	}
	logs, err = open(empty + ";/dsp")
	if err == nil || !strings.Contains(err.Error(), `ADSP_LIBRARY_PATH="`+empty+`;/dsp"`) {
		t.Errorf("Open with model.adsp_library_path %s: %v; want the skel error naming it", empty, err)
	}
	if !strings.Contains(logs, `"from":"config"`) {
		t.Errorf("the configured value is not logged as such: %s", logs)
	}
	checkNoLeaks(t, h)
}

func TestADSPLibraryPathChoice(t *testing.T) {
	ld := t.TempDir()
	if err := os.WriteFile(filepath.Join(ld, "libQnnHtp.so"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sys := ";/vendor/lib/rfsa/adsp;/vendor/dsp/cdsp;/system/lib/rfsa/adsp;/dsp"
	for _, tc := range []struct {
		name               string
		cfg                Config
		env, ld            string
		wantValue, wantSrc string
	}{
		{"config wins", Config{ADSPLibraryPath: "/a;/b", Backend: "/x/libQnnHtp.so"}, "/env", "", "/a;/b", "config"},
		{"environment", Config{Backend: "/x/libQnnHtp.so"}, "/env;/dsp", "", "/env;/dsp", "environment"},
		{"library folders", Config{Backend: "/x/libQnnHtp.so", System: "/y/libQnnSystem.so"}, "", "", "/x;/y" + sys, "default"},
		{"one folder once", Config{Backend: "/x/libQnnHtp.so", System: "/x/libQnnSystem.so"}, "", "", "/x" + sys, "default"},
		{"bare name found in LD_LIBRARY_PATH", Config{Backend: "libQnnHtp.so", System: "libQnnSystem.so"}, "", "/nowhere:" + ld, ld + sys, "default"},
		{"bare names not found", Config{Backend: "libQnnHtp.so"}, "", "/nowhere", sys[1:], "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, src := adspLibraryPath(tc.cfg, tc.env, tc.ld)
			if v != tc.wantValue || src != tc.wantSrc {
				t.Errorf("adspLibraryPath = %q (%s), want %q (%s)", v, src, tc.wantValue, tc.wantSrc)
			}
		})
	}
}

func TestNamespaceHint(t *testing.T) {
	for _, tc := range []struct {
		goos, exe string
		want      bool
	}{
		{"android", "/data/local/tmp/hexserve/hexserve", false},
		{"android", "/data/data/org.example/files/hexserve", true},
		{"android", "/sdcard/hexserve", true},
		{"linux", "/opt/hexserve", false},
		{"android", "", false},
	} {
		got := namespaceHint(tc.goos, tc.exe)
		if (got != "") != tc.want {
			t.Errorf("namespaceHint(%s, %s) = %q, want a hint: %v", tc.goos, tc.exe, got, tc.want)
		}
		if got != "" && (!strings.Contains(got, tc.exe) || !strings.Contains(got, "/data/local/tmp") || !strings.Contains(got, "libcdsprpc.so")) {
			t.Errorf("hint %q does not name the location, /data/local/tmp and libcdsprpc.so", got)
		}
	}
}
