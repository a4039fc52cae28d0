package qnn

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// systemDSPDirs are where phones keep DSP libraries (the folders ExecuTorch's
// and Qualcomm's run scripts append to ADSP_LIBRARY_PATH).
var systemDSPDirs = []string{"/vendor/lib/rfsa/adsp", "/vendor/dsp/cdsp", "/system/lib/rfsa/adsp", "/dsp"}

// adspLibraryPath returns the ADSP_LIBRARY_PATH Open uses and where it comes
// from: Config.ADSPLibraryPath, else the environment's value, else the
// folders of the configured libraries (a bare name is looked up in
// ldPath, the LD_LIBRARY_PATH the linker searched) followed by the system
// DSP folders.
func adspLibraryPath(cfg Config, env, ldPath string) (value, source string) {
	if cfg.ADSPLibraryPath != "" {
		return cfg.ADSPLibraryPath, "config"
	}
	if env != "" {
		return env, "environment"
	}
	var dirs []string
	seen := map[string]bool{}
	for _, lib := range []string{cfg.Backend, cfg.System} {
		dir := libDir(lib, ldPath)
		if dir != "" && !seen[dir] {
			seen[dir] = true
			dirs = append(dirs, dir)
		}
	}
	return strings.Join(append(dirs, systemDSPDirs...), ";"), "default"
}

// libDir is the absolute folder of lib: its own when it is a path, else the
// first LD_LIBRARY_PATH folder holding it; "" when unknown.
func libDir(lib, ldPath string) string {
	if lib == "" {
		return ""
	}
	if strings.ContainsRune(lib, '/') {
		abs, err := filepath.Abs(lib)
		if err != nil {
			return ""
		}
		return filepath.Dir(abs)
	}
	for _, d := range filepath.SplitList(ldPath) {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, lib)); err == nil {
			if abs, err := filepath.Abs(d); err == nil {
				return abs
			}
		}
	}
	return ""
}

// setADSPLibraryPath sets ADSP_LIBRARY_PATH before the backend is loaded
// (the DSP loader reads it when the skel is opened) and logs the value.
func (r *Runtime) setADSPLibraryPath() error {
	v, src := adspLibraryPath(r.cfg, os.Getenv("ADSP_LIBRARY_PATH"), os.Getenv("LD_LIBRARY_PATH"))
	if strings.Contains(v, ":") && !strings.Contains(v, ";") {
		r.log.Warn().Str("ADSP_LIBRARY_PATH", v).Msg("qnn: ADSP_LIBRARY_PATH is ';'-separated; a ':' list is one directory to the DSP loader")
	}
	if src != "environment" {
		if err := os.Setenv("ADSP_LIBRARY_PATH", v); err != nil {
			return fmt.Errorf("qnn: set ADSP_LIBRARY_PATH: %w", err)
		}
	}
	r.log.Info().Str("ADSP_LIBRARY_PATH", v).Str("from", src).Msg("qnn: DSP library path")
	return nil
}

// skelHint adds to a deviceCreate failure where the DSP side (the skel) is
// looked for: a missing or mismatched libQnnHtpV<arch>Skel.so, or a stub
// that cannot be opened, shows up as "Transport layer setup failed" and
// deviceCreate 14001. On Android outside /data/local/tmp it also names the
// linker namespace (the stub needs libcdsprpc.so).
func skelHint(err error) error {
	switch CodeOf(err) {
	case CodeDeviceInvalidHandle, CodeMemAlloc:
		return err
	}
	exe, _ := os.Executable()
	ns := namespaceHint(runtime.GOOS, exe)
	if ns != "" {
		ns = "; " + ns
	}
	return fmt.Errorf("%w; the DSP side did not start: libQnnHtpV79Stub.so must be on LD_LIBRARY_PATH and libQnnHtpV79Skel.so "+
		"(V<arch> on other SoCs; both from the SDK build of libQnnHtp.so) in a folder listed in ADSP_LIBRARY_PATH=%q "+
		"(';'-separated; model.adsp_library_path sets it)%s", err, os.Getenv("ADSP_LIBRARY_PATH"), ns)
}

// namespaceHint explains a libcdsprpc.so that cannot be opened on Android
// when exe is outside /data/local/tmp: the linker namespace of other
// locations hides the vendor libraries. "" elsewhere.
func namespaceHint(goos, exe string) string {
	if goos != "android" || exe == "" || strings.HasPrefix(exe, "/data/local/tmp/") {
		return ""
	}
	return fmt.Sprintf("hexserve runs from %s, outside /data/local/tmp: Android's linker namespace for that location hides the vendor "+
		"libraries (/vendor/lib64/libcdsprpc.so); run it from /data/local/tmp (adb shell), or, inside an app, declare "+
		`<uses-native-library android:name="libcdsprpc.so" android:required="false"/>`, exe)
}
