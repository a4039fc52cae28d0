package qnn

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/hexserve/hexserve/internal/modelfile"
)

// BinaryInfo reads the graphs and their I/O tensors out of a context binary
// held in buf, through QnnSystem. The result is a deep copy.
func (r *Runtime) BinaryInfo(buf []byte) ([]GraphInfo, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("qnn: empty context binary")
	}
	m, err := r.binaryInfo(unsafe.Pointer(&buf[0]), uint64(len(buf)))
	if err != nil {
		return nil, err
	}
	return m.graphs, nil
}

func (r *Runtime) binaryInfo(buf unsafe.Pointer, size uint64) (binaryMeta, error) {
	if r.system.contextCreate == nil {
		return binaryMeta{}, ErrClosed
	}
	var h systemHandle
	if err := r.status("systemContextCreate", r.system.contextCreate(&h)); err != nil {
		return binaryMeta{}, err
	}
	defer r.system.contextFree(h)
	var info unsafe.Pointer
	var err error = &Error{Code: CodeNotSupported}
	// getMetaData takes a const buffer (the file is mapped read-only); the
	// older getBinaryInfo is the fallback.
	if r.system.getMetaData != nil {
		err = r.status("systemContextGetMetaData", r.system.getMetaData(h, buf, size, &info))
	}
	if CodeOf(err) == CodeNotSupported && r.system.getBinaryInfo != nil {
		var infoSize uint64
		err = r.status("systemContextGetBinaryInfo", r.system.getBinaryInfo(h, buf, size, &info, &infoSize))
	}
	if err != nil {
		return binaryMeta{}, err
	}
	return parseBinaryInfo(info)
}

// Arch returns the DSP architecture reported by deviceGetPlatformInfo, such
// as "v79". The platform-info layout is the public QnnDevice.h /
// QnnHtpDevice.h one (OnChipDeviceInfoExtension: vtcmSize size_t first,
// arch at byte 24 of the extension); it is not measured against a header
// build nor checked on a device (UNCONFIRMED).
func (r *Runtime) Arch() (string, error) {
	if r.core.deviceGetPlatformInfo == nil {
		return "", fmt.Errorf("qnn: backend has no deviceGetPlatformInfo: %w", &Error{Code: CodeNotSupported, Op: "deviceGetPlatformInfo"})
	}
	var p unsafe.Pointer
	if err := r.status("deviceGetPlatformInfo", r.core.deviceGetPlatformInfo(r.logH, &p)); err != nil {
		return "", err
	}
	if p == nil {
		return "", fmt.Errorf("qnn: deviceGetPlatformInfo returned NULL")
	}
	defer r.core.deviceFreePlatformInfo(r.logH, p)
	pi := (*cPlatformInfo)(p)
	if pi.version != 1 {
		return "", fmt.Errorf("qnn: unsupported platform info version %d", pi.version)
	}
	if pi.numHwDevices == 0 || pi.hwDevices == nil {
		return "", fmt.Errorf("qnn: platform info lists no hardware device")
	}
	for _, d := range unsafe.Slice((*cHwDeviceInfo)(pi.hwDevices), pi.numHwDevices) {
		if d.version != 1 || d.extension == nil {
			continue
		}
		ext := (*cHtpDeviceInfoExt)(d.extension)
		if ext.devType != 0 {
			continue
		}
		if !knownArch[ext.arch] {
			return "", fmt.Errorf("qnn: platform info reports unknown HTP arch %d (SoC model %d): layout mismatch or new device", ext.arch, ext.socModel)
		}
		return fmt.Sprintf("v%d", ext.arch), nil
	}
	return "", fmt.Errorf("qnn: platform info has no on-chip HTP device with an arch")
}

// knownArch are the QnnHtpDevice_Arch_t values of released HTP generations.
var knownArch = map[uint32]bool{68: true, 69: true, 73: true, 75: true, 79: true, 81: true, 85: true}

// socArch maps QNN SoC model numbers (binary info socModel) to the HTP arch
// (docs/qnn-abi.md section 5).
var socArch = map[uint32]string{43: "v73", 57: "v75", 69: "v79", 87: "v81"}

// Context is a QNN context created from a context binary file.
type Context struct {
	rt   *Runtime
	path string
	h    contextHandle
	data []byte // the read-only file mapping LoadContext made (nil for LoadContextData)
	meta binaryMeta

	mu     sync.Mutex
	closed bool
	graphs map[string]*Graph
	regs   map[regKey]*registration
	calls  map[*Call]struct{}
}

// ContextOptions are a context's HTP custom configs at creation.
type ContextOptions struct {
	// Group registers the context in a multi-context group sharing one
	// spill-fill buffer (REGISTER_MULTI_CONTEXTS); nil: none.
	Group *Group
	// ReadBudgetMB, when > 0, caps the memory the backend uses to read the
	// binary (FILE_READ_MEMORY_BUDGET, in MB: Genie's mmap-budget).
	ReadBudgetMB uint64
}

// LoadContext maps the context binary at path read-only (the bytes never
// enter the Go heap), reads its graph metadata and creates the context with
// o. The mapping stays until Close.
func (r *Runtime) LoadContext(path string, o ContextOptions) (*Context, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed || r.backend == 0 {
		return nil, ErrClosed
	}
	data, err := modelfile.Map(path, 0)
	if err != nil {
		return nil, fmt.Errorf("qnn: load context: %w", err)
	}
	if data == nil {
		return nil, fmt.Errorf("qnn: load context %s: empty file", path)
	}
	c, err := r.createContext(path, data, o)
	if err != nil {
		modelfile.Unmap(data)
		return nil, err
	}
	c.data = data
	return c, nil
}

// Group puts contexts into one HTP multi-context group sharing a spill-fill
// buffer (QNN_HTP_CONTEXT_CONFIG_OPTION_REGISTER_MULTI_CONTEXTS): the first
// context created with a Group starts it, later ones name it.
type Group struct {
	First     *Context // nil until the first context of the group exists
	SpillFill uint64   // maxSpillFillBuffer in bytes
}

// LoadContextData creates a context from a context binary held in data
// (for example a slice of a memory-mapped .pte), named name in errors, with
// o. data must stay valid and unchanged until the context is closed; the
// context does not own it.
func (r *Runtime) LoadContextData(name string, data []byte, o ContextOptions) (*Context, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed || r.backend == 0 {
		return nil, ErrClosed
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("qnn: load context %s: empty binary", name)
	}
	return r.createContext(name, data, o)
}

// createContext reads the binary's metadata and creates the context with
// o's HTP custom configs (a Group's first context starts it; later ones
// name it). A large or slow one is logged at info level as it is ready, so
// a model's load shows its progress binary by binary (the rest at debug
// level).
func (r *Runtime) createContext(name string, data []byte, o ContextOptions) (*Context, error) {
	group := o.Group
	if group != nil && group.First != nil {
		group.First.mu.Lock()
		closed := group.First.closed
		group.First.mu.Unlock()
		if closed {
			return nil, fmt.Errorf("qnn: load context %s: the first context of its group (%s) is closed", name, group.First.path)
		}
	}
	cfg := configList(o.customs())
	if cfg != nil {
		defer cFree(cfg)
	}
	start := time.Now()
	c := &Context{rt: r, path: name, graphs: map[string]*Graph{}, regs: map[regKey]*registration{}, calls: map[*Call]struct{}{}}
	buf, size := unsafe.Pointer(&data[0]), uint64(len(data))
	var err error
	if c.meta, err = r.binaryInfo(buf, size); err != nil {
		return nil, fmt.Errorf("qnn: context binary %s: %w", name, err)
	}
	if err := r.status("contextCreateFromBinary", r.core.contextCreateFromBinary(r.backend, r.device, cfg, buf, size, &c.h, 0)); err != nil {
		return nil, fmt.Errorf("qnn: context binary %s: %w", name, err)
	}
	r.mu.Lock()
	r.contexts[c] = struct{}{}
	r.mu.Unlock()
	if group != nil && group.First == nil {
		group.First = c
	}
	took := time.Since(start)
	ev := r.log.Debug()
	if len(data) >= progressBytes || took >= progressTime {
		ev = r.log.Info()
	}
	ev.Str("file", name).Str("size", fmt.Sprintf("%.1f MiB", float64(len(data))/(1<<20))).
		Str("took", took.Round(time.Millisecond).String()).Msg("qnn: context binary loaded")
	return c, nil
}

// htpCustom is one QnnHtpContext_CustomConfig_t (24 B: option u32 @0,
// union @8): REGISTER_MULTI_CONTEXTS (2: firstGroupHandle @8,
// maxSpillFillBuffer u64 @16) or FILE_READ_MEMORY_BUDGET (3: u64 MB @8).
type htpCustom struct {
	option    uint32
	at8, at16 uint64
}

// customs are o's HTP custom context configs.
func (o ContextOptions) customs() []htpCustom {
	var cs []htpCustom
	if g := o.Group; g != nil {
		var first uint64 // the first context of a group passes a NULL handle
		if g.First != nil {
			first = uint64(uintptr(g.First.h))
		}
		cs = append(cs, htpCustom{option: 2, at8: first, at16: g.SpillFill})
	}
	if o.ReadBudgetMB > 0 {
		cs = append(cs, htpCustom{option: 3, at8: o.ReadBudgetMB})
	}
	return cs
}

// configList writes cs as a NULL-terminated QnnContext_Config_t* list of
// {option CUSTOM (0) @0, customConfig @8} entries, in one zeroed C
// allocation the caller frees; nil when cs is empty.
func configList(cs []htpCustom) unsafe.Pointer {
	if len(cs) == 0 {
		return nil
	}
	n, ptr := uintptr(len(cs)), unsafe.Sizeof(uintptr(0))
	list := cAlloc((n+1)*ptr + n*16 + n*24) // the pointers (and NULL), the configs, the custom configs
	for i, c := range cs {
		one := unsafe.Add(list, (n+1)*ptr+uintptr(i)*16)
		custom := unsafe.Add(list, (n+1)*ptr+n*16+uintptr(i)*24)
		*(*uint32)(custom) = c.option
		*(*uint64)(unsafe.Add(custom, 8)) = c.at8
		*(*uint64)(unsafe.Add(custom, 16)) = c.at16
		*(*unsafe.Pointer)(unsafe.Add(one, 8)) = custom
		*(*unsafe.Pointer)(unsafe.Add(list, uintptr(i)*ptr)) = one
	}
	return list
}

// Context binaries this large, or this slow to load, are logged at info
// level.
const (
	progressBytes = 64 << 20
	progressTime  = time.Second
)

// Path is the file the context was loaded from.
func (c *Context) Path() string { return c.path }

// Graphs describes the context's graphs (copied from binary info).
func (c *Context) Graphs() []GraphInfo { return c.meta.graphs }

// SocModel is the SoC model recorded in the binary (69 = SM8750), or 0 when
// the binary info is older than version 3.
func (c *Context) SocModel() uint32 { return c.meta.socModel }

// Arch is the DSP architecture the binary was prepared for ("v79"), derived
// from SocModel; "" when the binary info has no SoC model or it is not one
// of SM8550 (v73), SM8650 (v75), SM8750 (v79), SM8850 (v81).
func (c *Context) Arch() string { return socArch[c.meta.socModel] }

// SocVersion is the binary info's socVersion string.
func (c *Context) SocVersion() string { return c.meta.socVersion }

// Graph is a graph retrieved from a context.
type Graph struct {
	ctx  *Context
	h    graphHandle
	info GraphInfo
}

// Info describes the graph's inputs and outputs.
func (g *Graph) Info() GraphInfo { return g.info }

// Graph retrieves the graph called name (once; later calls return the same
// *Graph).
func (c *Context) Graph(name string) (*Graph, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if g, ok := c.graphs[name]; ok {
		return g, nil
	}
	var info *GraphInfo
	for i := range c.meta.graphs {
		if c.meta.graphs[i].Name == name {
			info = &c.meta.graphs[i]
		}
	}
	if info == nil {
		names := make([]string, len(c.meta.graphs))
		for i, g := range c.meta.graphs {
			names[i] = g.Name
		}
		return nil, fmt.Errorf("qnn: %s has no graph %q (graphs: %q)", c.path, name, names)
	}
	cname := append([]byte(name), 0)
	g := &Graph{ctx: c, info: *info}
	if err := c.rt.status("graphRetrieve", c.rt.core.graphRetrieve(c.h, &cname[0], &g.h)); err != nil {
		return nil, fmt.Errorf("qnn: graph %q of %s: %w", name, c.path, err)
	}
	c.graphs[name] = g
	return g, nil
}

// Close closes the context's Calls, deregisters its memory, frees the
// context and unmaps the file. It is idempotent.
func (c *Context) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	calls := slices.Collect(maps.Keys(c.calls))
	c.mu.Unlock()

	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	for _, k := range calls {
		keep(k.Close())
	}
	c.mu.Lock()
	for _, reg := range c.regs {
		keep(c.deregister(reg))
	}
	c.regs = nil
	c.mu.Unlock()
	r := c.rt
	if c.h != 0 && r.core.contextFree != nil {
		keep(r.status("contextFree", r.core.contextFree(c.h, 0)))
		c.h = 0
	}
	if c.data != nil {
		if err := modelfile.Unmap(c.data); err != nil {
			keep(fmt.Errorf("qnn: munmap %s: %w", c.path, err))
		}
		c.data = nil
	}
	r.mu.Lock()
	delete(r.contexts, c)
	r.mu.Unlock()
	return first
}
