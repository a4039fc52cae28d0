// Package qnn binds Qualcomm's QNN C API (libQnnHtp.so, libQnnSystem.so and,
// optionally, libcdsprpc.so) through purego, without cgo on linux. It loads
// prebuilt HTP context binaries and executes their graphs; it does not build
// graphs.
//
// Typical use:
//
//	rt, err := qnn.Open(qnn.Config{Backend: ".../libQnnHtp.so", System: ".../libQnnSystem.so",
//		RPCMem: "libcdsprpc.so", PerfMode: qnn.PerfBurst})
//	defer rt.Close()
//	ctx, err := rt.LoadContext("decode.bin", qnn.ContextOptions{})   // mmap'd, never copied into the Go heap
//	g, err := ctx.Graph("decode")
//	x, err := rt.Alloc(ctx.Graphs()[0].Inputs[0].Bytes())
//	call, err := g.Bind([]qnn.Binding{{Name: "x", Buffer: x}, ...}, outputs)
//	err = call.Execute()                       // repeat; refresh the buffers' bytes in between
//
// Memory: every buffer the backend sees (tensor arrays, names, dimensions,
// data) lives in C memory (rpcmem when libcdsprpc.so is loaded, else libc),
// built once per Call; no Go pointer is kept by C after a call returns. With
// rpcmem the buffers are registered with the context (zero copy on the
// phone) with one kind per allocation, as ExecuTorch does: an Alloc buffer
// holds one tensor and is registered once (ION); an AllocPool buffer holds
// tensors at offsets or one region seen with different shapes, each view
// registered as an HTP shared buffer. A view the backend refuses to register,
// and every buffer without rpcmem, is passed as a client buffer.
//
// Errors: a failed QNN call is an *Error with the QNN code and the backend's
// message; IsDeviceRestart tells the caller to recreate its contexts.
// Binding mistakes (missing tensor, buffer too small) are plain errors that
// name the graph and the tensor, caught before QNN is called.
//
// Architecture: Context.Arch derives the binary's DSP arch from its SoC
// model (binary info v3); Runtime.Arch asks the device (deviceGetPlatformInfo).
//
// Lifetimes: Runtime.Close closes every Context (and its Calls) and frees
// every Buffer the Runtime allocated, in reverse order of creation; all Close
// methods are idempotent. A Call must not be used by two goroutines at once;
// QNN itself serialises executions of one graph.
//
// What is checked against real headers and what is not is stated on each
// mirrored struct (abi.go); the platform-info layout used by Arch and the
// log-callback path on Android bionic are UNCONFIRMED on a device.
package qnn

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/rs/zerolog"
)

// Config says which libraries to load and how to set up the device.
type Config struct {
	Backend string // path of libQnnHtp.so (or hostsim's stand-in)
	System  string // path of libQnnSystem.so
	// RPCMem is the path or name of libcdsprpc.so. Empty, or a library that
	// cannot be loaded, means plain client buffers (one copy per execute on
	// the phone).
	RPCMem string
	// ADSPLibraryPath, when not empty, is set as ADSP_LIBRARY_PATH before the
	// backend is loaded: a ';'-separated list of directories holding the DSP
	// skel (e.g. "/data/local/tmp/qnn;/vendor/lib/rfsa/adsp;/dsp"). When it
	// is empty and the environment has none, Open sets the folders of
	// Backend and System followed by the system DSP folders.
	ADSPLibraryPath string
	// Logger receives the backend's log lines through a C callback. nil
	// means no QNN log handle at all.
	Logger   *zerolog.Logger
	LogLevel LogLevel // maximum level forwarded; 0 means LogWarn
	PerfMode PerfMode // HTP power vote; "" leaves the backend's default
	// Turn, when set, is shared by the runtimes of several models on the
	// one NPU: their graph executions take turns (see Turn).
	Turn *Turn
}

// Version is a QNN API version.
type Version struct{ Major, Minor, Patch uint32 }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Provider describes the loaded backend and system providers.
type Provider struct {
	Name      string  // e.g. "HTP_QTI_AISW"
	BackendID uint32  // 6 for HTP
	Core      Version // core API, e.g. 2.32.0 for QAIRT 2.43
	Backend   Version // backend (HTP) API
	System    Version // QnnSystem API
}

// Runtime is a loaded backend with one backend handle and one device.
type Runtime struct {
	cfg      Config
	log      zerolog.Logger
	provider Provider

	backendLib, systemLib, rpcLib uintptr

	core   coreFuncs
	system systemFuncs
	rpc    *rpcmemFuncs // nil: client buffers
	perf   *perfFuncs

	logH     logHandle
	backend  backendHandle
	device   deviceHandle
	powerID  uint32
	hasPower bool

	mu       sync.Mutex
	closed   bool
	contexts map[*Context]struct{}
	buffers  map[*Buffer]struct{}
}

// HTP backend id and the API versions this package accepts.
const (
	backendIDHTP = 6
	// Core API 2.20 (QAIRT 2.27) is the oldest accepted: the 2.13-era table
	// (core 2.7) had slots inserted at 2, 16, 29 and 33 later, so older
	// tables put contextCreateFromBinary etc. elsewhere; the 71-slot layout
	// used here was checked for core 2.32 and 2.35 and later SDKs only
	// append. Where between 2.7 and 2.20 the layout settled is
	// UNCONFIRMED, so those are refused rather than guessed.
	minCoreMajor, minCoreMinor = 2, 20
	// Newest core minor whose table layout was seen (QAIRT 2.49).
	maxTestedCoreMinor = 38
	// System API 1.x: slots 0-3 exist since 1.1 and the table is append-only.
	minSystemMajor = 1
)

// providerVersion is what provider selection looks at.
type providerVersion struct {
	backendID uint32
	api       Version
}

// selectProvider returns the index of the first provider for backendID
// whose API has the wanted major version and at least minMinor. A backend
// filter of 0 accepts any id (system libraries report 0).
func selectProvider(ps []providerVersion, backendID, major, minMinor uint32, what string) (int, error) {
	if len(ps) == 0 {
		return -1, fmt.Errorf("qnn: %s library returned no providers", what)
	}
	var seen []string
	for i, p := range ps {
		if backendID != 0 && p.backendID != backendID {
			seen = append(seen, fmt.Sprintf("backend %d", p.backendID))
			continue
		}
		if p.api.Major == major && p.api.Minor >= minMinor {
			return i, nil
		}
		seen = append(seen, "API "+p.api.String())
	}
	return -1, fmt.Errorf("qnn: no usable %s provider: need API %d.x with x >= %d (backend %d); found %s",
		what, major, minMinor, backendID, strings.Join(seen, ", "))
}

// Open sets ADSP_LIBRARY_PATH (see Config.ADSPLibraryPath), loads the
// libraries named by cfg, creates the backend and the device (a backend
// answering deviceCreate with UNSUPPORTED_FEATURE is used without one), and
// casts the power vote. On failure everything already set up is released.
func Open(cfg Config) (_ *Runtime, err error) {
	switch cfg.PerfMode {
	case PerfNone, PerfBurst, PerfSustained, PerfBalanced:
	default:
		return nil, fmt.Errorf("qnn: unknown perf mode %q (want burst, sustained, balanced or empty)", cfg.PerfMode)
	}
	if cfg.LogLevel == 0 {
		cfg.LogLevel = LogWarn
	}
	if cfg.LogLevel > LogDebug {
		return nil, fmt.Errorf("qnn: log level %d out of range 1-5", cfg.LogLevel)
	}
	r := &Runtime{
		cfg:      cfg,
		log:      zerolog.Nop(),
		contexts: map[*Context]struct{}{},
		buffers:  map[*Buffer]struct{}{},
	}
	if cfg.Logger != nil {
		r.log = *cfg.Logger
	}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if _, err := loadLibc(); err != nil {
		return nil, err
	}
	for _, step := range []func() error{r.setADSPLibraryPath, r.loadBackend, r.loadSystem} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	r.loadRPCMem()
	if cfg.Logger != nil && r.core.logCreate != nil {
		cb := logCallback()
		setLogSink(cfg.Logger)
		if err := r.status("logCreate", r.core.logCreate(cb, uint32(cfg.LogLevel), &r.logH)); err != nil {
			return nil, err
		}
	}
	if err := r.status("backendCreate", r.core.backendCreate(r.logH, nil, &r.backend)); err != nil {
		return nil, err
	}
	if r.core.deviceCreate != nil {
		err := r.status("deviceCreate", r.core.deviceCreate(r.logH, nil, &r.device))
		switch {
		case err == nil:
		case CodeOf(err) == CodeNotSupported:
			// QNN_DEVICE_ERROR_UNSUPPORTED_FEATURE: Qualcomm's sample app goes
			// on without a device handle (contexts then use the default device).
			r.device = 0
			r.log.Info().Err(err).Msg("qnn: deviceCreate: device feature unsupported; going on without a device handle")
		default:
			return nil, skelHint(err)
		}
	}
	if err := r.setPerfMode(cfg.PerfMode); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Runtime) loadBackend() error {
	path := r.cfg.Backend
	if path == "" {
		return errors.New("qnn: Config.Backend (path of libQnnHtp.so) is empty")
	}
	// Qnn_ErrorHandle_t QnnInterface_getProviders(const QnnInterface_t*** providerList, uint32_t* numProviders)
	pp, err := r.openProvider(&r.backendLib, "backend", path, "QnnInterface_getProviders", func(p unsafe.Pointer) providerVersion {
		c := (*cInterface)(p)
		return providerVersion{c.backendID, Version(c.coreAPI)}
	}, backendIDHTP, minCoreMajor, minCoreMinor)
	if err != nil {
		return err
	}
	p := (*cInterface)(pp)
	if p.coreAPI.Minor > maxTestedCoreMinor {
		r.log.Info().Str("core_api", Version(p.coreAPI).String()).Msg("qnn: core API newer than any checked layout; later SDKs are expected to append slots only")
	}
	r.provider.Name = goString(p.providerName)
	r.provider.BackendID = p.backendID
	r.provider.Core = Version(p.coreAPI)
	r.provider.Backend = Version(p.backendAPI)
	if err := loadCoreFuncs(&r.core, unsafe.Add(unsafe.Pointer(p), coreTableOffset)); err != nil {
		return fmt.Errorf("%w (backend %s, core API %s)", err, path, r.provider.Core)
	}
	return nil
}

func (r *Runtime) loadSystem() error {
	path := r.cfg.System
	if path == "" {
		return errors.New("qnn: Config.System (path of libQnnSystem.so) is empty")
	}
	// Qnn_ErrorHandle_t QnnSystemInterface_getProviders(const QnnSystemInterface_t*** providerList, uint32_t* numProviders)
	pp, err := r.openProvider(&r.systemLib, "system", path, "QnnSystemInterface_getProviders", func(p unsafe.Pointer) providerVersion {
		c := (*cSystemInterface)(p)
		return providerVersion{c.backendID, Version(c.systemAPI)}
	}, 0, minSystemMajor, 0)
	if err != nil {
		return err
	}
	p := (*cSystemInterface)(pp)
	r.provider.System = Version(p.systemAPI)
	if err := loadSystemFuncs(&r.system, unsafe.Add(unsafe.Pointer(p), systemTableOffset)); err != nil {
		return fmt.Errorf("%w (system %s, API %s)", err, path, r.provider.System)
	}
	return nil
}

// openProvider opens the kind ("backend" or "system") library at path into
// *lib, lists its interface providers with its getProviders symbol sym, and
// picks one by the backend ID and API version that version reads from each
// (selectProvider).
func (r *Runtime) openProvider(lib *uintptr, kind, path, sym string, version func(unsafe.Pointer) providerVersion, backendID, major, minMinor uint32) (unsafe.Pointer, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("qnn: load %s library %s: %w", kind, path, err)
	}
	*lib = h
	fn, err := purego.Dlsym(h, sym)
	if err != nil {
		return nil, fmt.Errorf("qnn: symbol %s in %s: %w", sym, path, err)
	}
	var getProviders func(list *unsafe.Pointer, n *uint32) uint64
	purego.RegisterFunc(&getProviders, fn)
	var list unsafe.Pointer
	var n uint32
	if err := r.status(sym, getProviders(&list, &n)); err != nil {
		return nil, err
	}
	if list == nil {
		n = 0
	}
	ps := unsafe.Slice((*unsafe.Pointer)(list), n)
	vs := make([]providerVersion, n)
	for i, p := range ps {
		vs[i] = version(p)
	}
	i, err := selectProvider(vs, backendID, major, minMinor, kind+" "+path)
	if err != nil {
		return nil, err
	}
	return ps[i], nil
}

// loadRPCMem loads libcdsprpc.so when configured; failure falls back to
// client buffers with a log line.
func (r *Runtime) loadRPCMem() {
	path := r.cfg.RPCMem
	if path == "" {
		return
	}
	if r.core.memRegister == nil {
		r.log.Info().Msg("qnn: backend has no memRegister; using client buffers")
		return
	}
	lib, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		exe, _ := os.Executable()
		if hint := namespaceHint(runtime.GOOS, exe); hint != "" {
			r.log.Warn().Err(err).Str("lib", path).Msg("qnn: rpcmem unavailable; using client buffers. " + hint)
			return
		}
		r.log.Info().Err(err).Str("lib", path).Msg("qnn: rpcmem unavailable; using client buffers")
		return
	}
	f, err := loadRPCMem(lib, path)
	if err != nil {
		purego.Dlclose(lib)
		r.log.Warn().Err(err).Msg("qnn: rpcmem unusable; using client buffers")
		return
	}
	r.rpcLib, r.rpc = lib, f
}

// Provider reports the loaded providers and their API versions.
func (r *Runtime) Provider() Provider { return r.provider }

// SharedMemory reports whether buffers come from rpcmem and are registered
// with contexts (zero copy), rather than passed as client buffers.
func (r *Runtime) SharedMemory() bool { return r.rpc != nil }

// Close releases everything in reverse order: contexts (deregistering
// their memory), buffers, the power vote (a down-vote, then the power config
// id), the device, the backend,
// the log handle, then the libraries. It is safe after a failed Open and
// when called twice; it returns the errors met, joined. It must not run
// concurrently with other methods of the Runtime or of its Contexts, Calls
// and Buffers.
func (r *Runtime) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	ctxs := slices.Collect(maps.Keys(r.contexts))
	bufs := slices.Collect(maps.Keys(r.buffers))
	r.mu.Unlock()

	var errs []error
	for _, c := range ctxs {
		errs = append(errs, c.Close())
	}
	for _, b := range bufs {
		errs = append(errs, b.Free())
	}
	if r.hasPower {
		errs = append(errs, r.releasePower())
		r.hasPower = false
	}
	if r.device != 0 {
		errs = append(errs, r.status("deviceFree", r.core.deviceFree(r.device)))
		r.device = 0
	}
	if r.backend != 0 {
		errs = append(errs, r.status("backendFree", r.core.backendFree(r.backend)))
		r.backend = 0
	}
	if r.logH != 0 {
		errs = append(errs, r.status("logFree", r.core.logFree(r.logH)))
		r.logH = 0
	}
	r.core = coreFuncs{}
	r.system = systemFuncs{}
	r.rpc, r.perf = nil, nil
	for _, lib := range []*uintptr{&r.rpcLib, &r.systemLib, &r.backendLib} {
		if *lib != 0 {
			if err := purego.Dlclose(*lib); err != nil {
				errs = append(errs, fmt.Errorf("qnn: dlclose: %w", err))
			}
			*lib = 0
		}
	}
	return errors.Join(errs...)
}

// ErrClosed is returned by methods of a closed Runtime or Context.
var ErrClosed = errors.New("qnn: closed")
