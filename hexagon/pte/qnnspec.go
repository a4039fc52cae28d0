package pte

import "fmt"

// Chipset is qc_compiler_spec.fbs QcomChipset.
type Chipset int32

// HtpArch is qc_compiler_spec.fbs HtpArch.
type HtpArch int32

// HtpPerformanceMode is qc_compiler_spec.fbs QnnExecuTorchHtpPerformanceMode.
type HtpPerformanceMode int32

// HtpPrecision is qc_compiler_spec.fbs QnnExecuTorchHtpPrecision.
type HtpPrecision int32

// HtpPdSession is qc_compiler_spec.fbs QnnExecuTorchHtpPdSession.
type HtpPdSession int32

// BackendType is qc_compiler_spec.fbs QnnExecuTorchBackendType.
type BackendType int32

// LogLevel is qc_compiler_spec.fbs QnnExecuTorchLogLevel.
type LogLevel int32

// ProfileLevel is qc_compiler_spec.fbs QnnExecuTorchProfileLevel.
type ProfileLevel int32

// Chipsets and architectures hexserve targets (all of the schema's are named).
const (
	SM8550 Chipset = 43
	SM8650 Chipset = 57
	SM8750 Chipset = 69
	SM8850 Chipset = 87

	V73 HtpArch = 73
	V75 HtpArch = 75
	V79 HtpArch = 79
	V81 HtpArch = 81
)

// Enum values used by ExecuTorch's HTP compiler spec.
const (
	HtpDefault HtpPerformanceMode = 0
	HtpBurst   HtpPerformanceMode = 2

	HtpQuantized HtpPrecision = 0
	HtpFp16      HtpPrecision = 1

	HtpUnsignedPd HtpPdSession = 0
	HtpSignedPd   HtpPdSession = 1

	HtpBackend BackendType = 2

	LogOff        LogLevel = 0
	LogLevelError LogLevel = 1

	ProfileOff ProfileLevel = 0
)

var chipsetNames = map[Chipset]string{0: "UNKNOWN_SM", 39: "SA8295", 72: "SA8797", 30: "SM8350", 36: "SM8450",
	42: "SM8475", 43: "SM8550", 57: "SM8650", 69: "SM8750", 87: "SM8850", 46: "SSG2115P", 58: "SSG2125P",
	45: "SXR1230P", 53: "SXR2230P", 75: "SXR2330P", 77: "QCS9100", 95: "SAR2230P", 52: "SA8255", 96: "SW6100",
	93: "QCM6490", 97: "SM8845"}
var archNames = map[HtpArch]string{0: "NONE", 68: "V68", 69: "V69", 73: "V73", 75: "V75", 79: "V79", 81: "V81"}
var perfNames = map[HtpPerformanceMode]string{0: "kHtpDefault", 1: "kHtpSustainedHighPerformance", 2: "kHtpBurst",
	3: "kHtpHighPerformance", 4: "kHtpPowerSaver", 5: "kHtpLowPowerSaver", 6: "kHtpHighPowerSaver",
	7: "kHtpLowBalanced", 8: "kHtpBalanced"}
var precisionNames = map[HtpPrecision]string{0: "kHtpQuantized", 1: "kHtpFp16"}
var pdNames = map[HtpPdSession]string{0: "kHtpUnsignedPd", 1: "kHtpSignedPd"}
var backendNames = map[BackendType]string{0: "kUndefinedBackend", 1: "kGpuBackend", 2: "kHtpBackend",
	3: "kDspBackend", 4: "kLpaiBackend"}
var logNames = map[LogLevel]string{0: "kLogOff", 1: "kLogLevelError", 2: "kLogLevelWarn", 3: "kLogLevelInfo",
	4: "kLogLevelVerbose", 5: "kLogLevelDebug"}
var profileNames = map[ProfileLevel]string{0: "kProfileOff", 1: "kProfileBasic", 2: "kProfileDetailed",
	3: "kProfileOptrace"}

func (c Chipset) String() string            { return enumName(chipsetNames, c) }
func (a HtpArch) String() string            { return enumName(archNames, a) }
func (m HtpPerformanceMode) String() string { return enumName(perfNames, m) }
func (p HtpPrecision) String() string       { return enumName(precisionNames, p) }
func (p HtpPdSession) String() string       { return enumName(pdNames, p) }
func (b BackendType) String() string        { return enumName(backendNames, b) }
func (l LogLevel) String() string           { return enumName(logNames, l) }
func (l ProfileLevel) String() string       { return enumName(profileNames, l) }

// MarshalText writes enums by their schema names.
func (c Chipset) MarshalText() ([]byte, error)            { return []byte(c.String()), nil }
func (a HtpArch) MarshalText() ([]byte, error)            { return []byte(a.String()), nil }
func (m HtpPerformanceMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }
func (p HtpPrecision) MarshalText() ([]byte, error)       { return []byte(p.String()), nil }
func (p HtpPdSession) MarshalText() ([]byte, error)       { return []byte(p.String()), nil }
func (b BackendType) MarshalText() ([]byte, error)        { return []byte(b.String()), nil }
func (l LogLevel) MarshalText() ([]byte, error)           { return []byte(l.String()), nil }
func (l ProfileLevel) MarshalText() ([]byte, error)       { return []byte(l.String()), nil }

// QNNOptions is the part of a QnnExecuTorchOptions compile spec
// (qc_compiler_spec.fbs) a host needs: SoC, HTP options and the flags that
// change how contexts are created. GPU, LPAI and op-package options are not
// read.
type QNNOptions struct {
	SocModel            Chipset            `json:"soc_model"`
	HtpArch             HtpArch            `json:"htp_arch"`
	VTCMMB              uint32             `json:"vtcm_size_in_mb"`
	Backend             BackendType        `json:"backend_type"`
	MaxSpillFill        int32              `json:"max_sf_buf_size"`
	PerformanceMode     HtpPerformanceMode `json:"performance_mode"`
	Precision           HtpPrecision       `json:"precision"`
	PdSession           HtpPdSession       `json:"pd_session"`
	UseConvHMX          bool               `json:"use_conv_hmx"`
	UseDLBC             bool               `json:"use_dlbc"`
	UseFoldReLU         bool               `json:"use_fold_relu"`
	UseMultiContexts    bool               `json:"use_multi_contexts"`
	UseWeightSharing    bool               `json:"use_weight_sharing"`
	UseSLCAllocator     bool               `json:"use_slc_allocator"`
	LibraryPath         string             `json:"library_path"`
	LogLevel            LogLevel           `json:"log_level"`
	OnlinePrepare       bool               `json:"online_prepare"`
	DumpIntermediate    bool               `json:"dump_intermediate_outputs"`
	ProfileLevel        ProfileLevel       `json:"profile_level"`
	SharedBuffer        bool               `json:"shared_buffer"`
	IsFromContextBinary bool               `json:"is_from_context_binary"`
	Saver               bool               `json:"saver"`
	SaverOutputDir      string             `json:"saver_output_dir"`
	UseMHA2SHA          bool               `json:"use_mha2sha"`
}

// HTPOptions returns the options ExecuTorch's generate_htp_compiler_spec and
// llama.py set for an HTP export on soc (as in the stories260K CI file, with
// shared buffers off as in the x86 emulator flow).
func HTPOptions(soc Chipset, arch HtpArch) QNNOptions {
	return QNNOptions{SocModel: soc, HtpArch: arch, VTCMMB: 8, Backend: HtpBackend, PerformanceMode: HtpBurst,
		Precision: HtpQuantized, UseConvHMX: true, UseFoldReLU: true, LogLevel: LogLevelError,
		SaverOutputDir: "saver_output", UseMHA2SHA: true}
}

// decodeOptions reads a QnnExecuTorchOptions flatbuffer.
func decodeOptions(b []byte) (o QNNOptions, err error) {
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(fbError)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("corrupt QnnExecuTorchOptions: %s", fe.msg)
		}
	}()
	f := newFB(b, "compile spec")
	if len(b) < 8 {
		return o, fmt.Errorf("%d bytes is too short for a QnnExecuTorchOptions flatbuffer", len(b))
	}
	t := f.table(f.deref(0, "QnnExecuTorchOptions"), "QnnExecuTorchOptions")
	if soc, ok := t.sub(0, "soc_info"); ok {
		o.SocModel = Chipset(soc.i32(0))
		if htp, ok := soc.sub(1, "htp_info"); ok {
			o.HtpArch, o.VTCMMB = HtpArch(htp.i32(0)), htp.u32(1)
		}
	}
	if be, ok := t.sub(1, "backend_options"); ok {
		o.Backend = BackendType(be.i32(0))
		if h, ok := be.sub(1, "htp_options"); ok {
			o.MaxSpillFill = h.i32(0)
			o.PerformanceMode = HtpPerformanceMode(h.i32(1))
			o.Precision = HtpPrecision(h.i32(2))
			o.PdSession = HtpPdSession(h.i32(3))
			o.UseConvHMX, o.UseDLBC, o.UseFoldReLU = h.boolean(4), h.boolean(5), h.boolean(6)
			o.UseMultiContexts, o.UseWeightSharing, o.UseSLCAllocator = h.boolean(7), h.boolean(8), h.boolean(9)
		}
	}
	o.LibraryPath = t.str(2, "library_path")
	o.LogLevel = LogLevel(t.i32(3))
	o.OnlinePrepare = t.boolean(4)
	o.DumpIntermediate = t.boolean(5)
	o.ProfileLevel = ProfileLevel(t.i32(6))
	o.SharedBuffer = t.boolean(7)
	o.IsFromContextBinary = t.boolean(8)
	o.Saver = t.boolean(9)
	o.SaverOutputDir = t.str(10, "saver_output_dir")
	o.UseMHA2SHA = t.boolean(12)
	return o, nil
}
