package qnn

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Core function table slots (QnnInterface_ImplementationV2_x_t, docs/qnn-abi.md
// section 2). Only the slots this package calls are listed; every slot is
// at table offset 8·slot.
const (
	slotBackendCreate           = 1
	slotBackendFree             = 8
	slotContextCreateFromBinary = 13
	slotContextFree             = 14
	slotGraphRetrieve           = 20
	slotGraphExecute            = 21
	slotLogCreate               = 25
	slotLogFree                 = 27
	slotMemRegister             = 35
	slotMemDeRegister           = 36
	slotDeviceGetPlatformInfo   = 37
	slotDeviceFreePlatformInfo  = 38
	slotDeviceGetInfrastructure = 39
	slotDeviceCreate            = 40
	slotDeviceFree              = 43
	slotErrorGetMessage         = 48
)

// coreFuncs holds the bound entries of the backend's function table. A nil
// field is a NULL slot (unsupported by the backend).
type coreFuncs struct {
	// [1] Qnn_ErrorHandle_t QnnBackend_create(Qnn_LogHandle_t, const QnnBackend_Config_t**, Qnn_BackendHandle_t*)
	backendCreate func(log logHandle, cfg unsafe.Pointer, out *backendHandle) uint64
	// [8] Qnn_ErrorHandle_t QnnBackend_free(Qnn_BackendHandle_t)
	backendFree func(b backendHandle) uint64
	// [13] Qnn_ErrorHandle_t QnnContext_createFromBinary(Qnn_BackendHandle_t, Qnn_DeviceHandle_t,
	//      const QnnContext_Config_t**, const void* binaryBuffer, Qnn_ContextBinarySize_t, Qnn_ContextHandle_t*, Qnn_ProfileHandle_t)
	contextCreateFromBinary func(b backendHandle, d deviceHandle, cfg unsafe.Pointer, buf unsafe.Pointer, size uint64, out *contextHandle, profile uintptr) uint64
	// [14] Qnn_ErrorHandle_t QnnContext_free(Qnn_ContextHandle_t, Qnn_ProfileHandle_t)
	contextFree func(c contextHandle, profile uintptr) uint64
	// [20] Qnn_ErrorHandle_t QnnGraph_retrieve(Qnn_ContextHandle_t, const char* graphName, Qnn_GraphHandle_t*)
	graphRetrieve func(c contextHandle, name *byte, out *graphHandle) uint64
	// [21] Qnn_ErrorHandle_t QnnGraph_execute(Qnn_GraphHandle_t, const Qnn_Tensor_t* inputs, uint32_t numInputs,
	//      Qnn_Tensor_t* outputs, uint32_t numOutputs, Qnn_ProfileHandle_t, Qnn_SignalHandle_t)
	// Called with purego.SyscallN (Call.Execute): a RegisterFunc function
	// goes through reflect and allocates 7 times per call, on every token's
	// graph calls.
	graphExecute uintptr
	// [25] Qnn_ErrorHandle_t QnnLog_create(QnnLog_Callback_t, QnnLog_Level_t maxLogLevel, Qnn_LogHandle_t*)
	logCreate func(cb uintptr, level uint32, out *logHandle) uint64
	// [27] Qnn_ErrorHandle_t QnnLog_free(Qnn_LogHandle_t)
	logFree func(l logHandle) uint64
	// [35] Qnn_ErrorHandle_t QnnMem_register(Qnn_ContextHandle_t, const Qnn_MemDescriptor_t*, uint32_t, Qnn_MemHandle_t*)
	memRegister func(c contextHandle, descs unsafe.Pointer, n uint32, out unsafe.Pointer) uint64
	// [36] Qnn_ErrorHandle_t QnnMem_deRegister(const Qnn_MemHandle_t*, uint32_t)
	memDeRegister func(handles unsafe.Pointer, n uint32) uint64
	// [37] Qnn_ErrorHandle_t QnnDevice_getPlatformInfo(Qnn_LogHandle_t, const QnnDevice_PlatformInfo_t**)
	deviceGetPlatformInfo func(l logHandle, out *unsafe.Pointer) uint64
	// [38] Qnn_ErrorHandle_t QnnDevice_freePlatformInfo(Qnn_LogHandle_t, const QnnDevice_PlatformInfo_t*)
	deviceFreePlatformInfo func(l logHandle, info unsafe.Pointer) uint64
	// [39] Qnn_ErrorHandle_t QnnDevice_getInfrastructure(const QnnDevice_Infrastructure_t*)
	deviceGetInfrastructure func(out *unsafe.Pointer) uint64
	// [40] Qnn_ErrorHandle_t QnnDevice_create(Qnn_LogHandle_t, const QnnDevice_Config_t**, Qnn_DeviceHandle_t*)
	deviceCreate func(l logHandle, cfg unsafe.Pointer, out *deviceHandle) uint64
	// [43] Qnn_ErrorHandle_t QnnDevice_free(Qnn_DeviceHandle_t)
	deviceFree func(d deviceHandle) uint64
	// [48] Qnn_ErrorHandle_t QnnError_getMessage(Qnn_ErrorHandle_t, const char** errorMessage)
	errorGetMessage func(err uint64, out **byte) uint64
}

// tableSlot reads entry slot of a function table.
func tableSlot(table unsafe.Pointer, slot int) uintptr {
	return *(*uintptr)(unsafe.Add(table, 8*slot))
}

// bindSlot binds fn to the table entry when it is not NULL. A NULL entry
// leaves fn nil and is an error only when required.
func bindSlot(fn any, table unsafe.Pointer, slot int, name string, required bool) error {
	p := tableSlot(table, slot)
	if p == 0 {
		if required {
			return fmt.Errorf("qnn: function table slot %d (%s) is NULL", slot, name)
		}
		return nil
	}
	purego.RegisterFunc(fn, p)
	return nil
}

// loadCoreFuncs binds the backend table that starts at table. Optional
// slots that only work in pairs are dropped together.
func loadCoreFuncs(f *coreFuncs, table unsafe.Pointer) error {
	for _, s := range []struct {
		fn       any
		slot     int
		name     string
		required bool
	}{
		{&f.backendCreate, slotBackendCreate, "backendCreate", true},
		{&f.backendFree, slotBackendFree, "backendFree", true},
		{&f.contextCreateFromBinary, slotContextCreateFromBinary, "contextCreateFromBinary", true},
		{&f.contextFree, slotContextFree, "contextFree", true},
		{&f.graphRetrieve, slotGraphRetrieve, "graphRetrieve", true},
		{&f.logCreate, slotLogCreate, "logCreate", false},
		{&f.logFree, slotLogFree, "logFree", false},
		{&f.memRegister, slotMemRegister, "memRegister", false},
		{&f.memDeRegister, slotMemDeRegister, "memDeRegister", false},
		{&f.deviceGetPlatformInfo, slotDeviceGetPlatformInfo, "deviceGetPlatformInfo", false},
		{&f.deviceFreePlatformInfo, slotDeviceFreePlatformInfo, "deviceFreePlatformInfo", false},
		{&f.deviceGetInfrastructure, slotDeviceGetInfrastructure, "deviceGetInfrastructure", false},
		{&f.deviceCreate, slotDeviceCreate, "deviceCreate", false},
		{&f.deviceFree, slotDeviceFree, "deviceFree", false},
		{&f.errorGetMessage, slotErrorGetMessage, "errorGetMessage", false},
	} {
		if err := bindSlot(s.fn, table, s.slot, s.name, s.required); err != nil {
			return err
		}
	}
	if f.graphExecute = tableSlot(table, slotGraphExecute); f.graphExecute == 0 {
		return fmt.Errorf("qnn: function table slot %d (graphExecute) is NULL", slotGraphExecute)
	}
	if (f.logCreate == nil) != (f.logFree == nil) {
		f.logCreate, f.logFree = nil, nil
	}
	if (f.deviceCreate == nil) != (f.deviceFree == nil) {
		return fmt.Errorf("qnn: function table has only one of deviceCreate/deviceFree")
	}
	if (f.memRegister == nil) != (f.memDeRegister == nil) {
		f.memRegister, f.memDeRegister = nil, nil
	}
	if f.deviceFreePlatformInfo == nil {
		f.deviceGetPlatformInfo = nil
	}
	return nil
}

// System function table slots (QnnSystemInterface_ImplementationV1_x_t).
const (
	slotSystemContextCreate        = 0
	slotSystemContextGetBinaryInfo = 1
	slotSystemContextGetMetaData   = 2
	slotSystemContextFree          = 3
)

type systemFuncs struct {
	// [0] Qnn_ErrorHandle_t QnnSystemContext_create(QnnSystemContext_Handle_t*)
	contextCreate func(out *systemHandle) uint64
	// [1] Qnn_ErrorHandle_t QnnSystemContext_getBinaryInfo(QnnSystemContext_Handle_t, void* binaryBuffer,
	//     uint64_t binaryBufferSize, const QnnSystemContext_BinaryInfo_t** binaryInfo, Qnn_ContextBinarySize_t* binaryInfoSize)
	getBinaryInfo func(s systemHandle, buf unsafe.Pointer, size uint64, out *unsafe.Pointer, outSize *uint64) uint64
	// [2] Qnn_ErrorHandle_t QnnSystemContext_getMetadata(QnnSystemContext_Handle_t, const void* binaryBuffer,
	//     uint64_t binaryBufferSize, const QnnSystemContext_BinaryInfo_t** binaryInfo)
	getMetaData func(s systemHandle, buf unsafe.Pointer, size uint64, out *unsafe.Pointer) uint64
	// [3] Qnn_ErrorHandle_t QnnSystemContext_free(QnnSystemContext_Handle_t)
	contextFree func(s systemHandle) uint64
}

func loadSystemFuncs(f *systemFuncs, table unsafe.Pointer) error {
	if err := bindSlot(&f.contextCreate, table, slotSystemContextCreate, "systemContextCreate", true); err != nil {
		return err
	}
	if err := bindSlot(&f.getBinaryInfo, table, slotSystemContextGetBinaryInfo, "systemContextGetBinaryInfo", false); err != nil {
		return err
	}
	if err := bindSlot(&f.getMetaData, table, slotSystemContextGetMetaData, "systemContextGetMetaData", false); err != nil {
		return err
	}
	if err := bindSlot(&f.contextFree, table, slotSystemContextFree, "systemContextFree", true); err != nil {
		return err
	}
	if f.getBinaryInfo == nil && f.getMetaData == nil {
		return fmt.Errorf("qnn: system function table slots 1 (systemContextGetBinaryInfo) and 2 (systemContextGetMetaData) are both NULL")
	}
	return nil
}

// perfFuncs is the HTP perf infrastructure table (QnnHtpDevice_PerfInfrastructure_t).
type perfFuncs struct {
	// Qnn_ErrorHandle_t createPowerConfigId(uint32_t deviceId, uint32_t coreId, uint32_t* powerConfigId)
	createPowerConfigID func(deviceID, coreID uint32, out *uint32) uint64
	// Qnn_ErrorHandle_t destroyPowerConfigId(uint32_t powerConfigId)
	destroyPowerConfigID func(id uint32) uint64
	// Qnn_ErrorHandle_t setPowerConfig(uint32_t powerConfigId, const QnnHtpPerfInfrastructure_PowerConfig_t** config)
	setPowerConfig func(id uint32, cfgs unsafe.Pointer) uint64
}

// rpcmemFuncs are the libcdsprpc.so shared-memory entry points.
type rpcmemFuncs struct {
	// void* rpcmem_alloc(int heapid, uint32_t flags, int size)
	alloc func(heap int32, flags uint32, size int32) unsafe.Pointer
	// void rpcmem_free(void* po)
	free func(p unsafe.Pointer)
	// int rpcmem_to_fd(void* po)
	toFD func(p unsafe.Pointer) int32
}

func loadRPCMem(lib uintptr, path string) (*rpcmemFuncs, error) {
	f := &rpcmemFuncs{}
	for _, s := range []struct {
		fn   any
		name string
	}{{&f.alloc, "rpcmem_alloc"}, {&f.free, "rpcmem_free"}, {&f.toFD, "rpcmem_to_fd"}} {
		p, err := purego.Dlsym(lib, s.name)
		if err != nil {
			return nil, fmt.Errorf("qnn: symbol %s in %s: %w", s.name, path, err)
		}
		purego.RegisterFunc(s.fn, p)
	}
	return f, nil
}

// libcFuncs are the C library functions used for C-side memory and log
// formatting. libc is loaded once per process and never closed.
type libcFuncs struct {
	// void* calloc(size_t nmemb, size_t size)
	calloc func(n, size uintptr) unsafe.Pointer
	// void free(void*)
	free func(p unsafe.Pointer)
	// int vsnprintf(char* str, size_t size, const char* format, va_list ap)
	vsnprintf func(buf unsafe.Pointer, n uintptr, format unsafe.Pointer, ap unsafe.Pointer) int32
}

var libc struct {
	once sync.Once
	f    libcFuncs
	err  error
}

func libcName() string {
	if runtime.GOOS == "android" {
		return "libc.so"
	}
	return "libc.so.6"
}

// loadLibc binds libc once per process.
func loadLibc() (*libcFuncs, error) {
	libc.once.Do(func() {
		name := libcName()
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			libc.err = fmt.Errorf("qnn: load %s: %w", name, err)
			return
		}
		for _, s := range []struct {
			fn   any
			name string
		}{{&libc.f.calloc, "calloc"}, {&libc.f.free, "free"}, {&libc.f.vsnprintf, "vsnprintf"}} {
			p, err := purego.Dlsym(h, s.name)
			if err != nil {
				libc.err = fmt.Errorf("qnn: symbol %s in %s: %w", s.name, name, err)
				return
			}
			purego.RegisterFunc(s.fn, p)
		}
	})
	if libc.err != nil {
		return nil, libc.err
	}
	return &libc.f, nil
}

// cAlloc returns n zeroed bytes of C memory; it panics when out of memory,
// as Go allocation does.
func cAlloc(n uintptr) unsafe.Pointer {
	p := libc.f.calloc(1, max(n, 1))
	if p == nil {
		panic(fmt.Sprintf("qnn: calloc(%d) failed", n))
	}
	return p
}

func cFree(p unsafe.Pointer) {
	if p != nil {
		libc.f.free(p)
	}
}
