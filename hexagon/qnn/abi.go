package qnn

import "unsafe"

// This file mirrors the C structs of the QNN headers that the package reads
// or writes. Sizes and offsets are the ones measured against the QAIRT 2.43
// headers (docs/qnn-abi.md); abi_test.go checks every one of them. All enums are
// 4 bytes. Pointers into backend-owned or C-allocated memory are typed
// pointers or unsafe.Pointer; opaque unions that may hold a handle instead of
// a pointer are uintptr.

// Opaque QNN handles. They are distinct types so that a device handle can
// never be passed where a context handle is expected.
type (
	logHandle     uintptr // Qnn_LogHandle_t
	backendHandle uintptr // Qnn_BackendHandle_t
	deviceHandle  uintptr // Qnn_DeviceHandle_t
	contextHandle uintptr // Qnn_ContextHandle_t
	graphHandle   uintptr // Qnn_GraphHandle_t
	memHandle     uintptr // Qnn_MemHandle_t
	systemHandle  uintptr // QnnSystemContext_Handle_t
)

// cVersion is Qnn_Version_t (12 B, align 4).
type cVersion struct {
	Major, Minor, Patch uint32
}

// cInterface is the fixed head of QnnInterface_t; the function table starts
// at byte 40 (coreTableOffset). Never copied by value: its size grows with
// the table.
type cInterface struct {
	backendID    uint32 // @0
	_            uint32
	providerName *byte    // @8
	coreAPI      cVersion // @16
	backendAPI   cVersion // @28
	// function table @40
}

// cSystemInterface is the fixed head of QnnSystemInterface_t; its function
// table starts at byte 32.
type cSystemInterface struct {
	backendID    uint32 // @0
	_            uint32
	providerName *byte    // @8
	systemAPI    cVersion // @16
	_            uint32
	// function table @32
}

const (
	coreTableOffset   = 40
	systemTableOffset = 32
)

// cQuantizeParams is Qnn_QuantizeParams_t (40 B). The 32-byte union at @8 is
// read through the typed views below.
type cQuantizeParams struct {
	encodingDefinition uint32    // @0
	encoding           uint32    // @4 Qnn_QuantizationEncoding_t
	u                  [4]uint64 // @8 union
}

// cScaleOffset is Qnn_ScaleOffset_t (8 B), the SCALE_OFFSET union member.
type cScaleOffset struct {
	scale  float32
	offset int32
}

// cAxisScaleOffset is Qnn_AxisScaleOffset_t (16 B).
type cAxisScaleOffset struct {
	axis            int32
	numScaleOffsets uint32
	scaleOffset     *cScaleOffset
}

// cBwScaleOffset is Qnn_BwScaleOffset_t (12 B).
type cBwScaleOffset struct {
	bitwidth uint32
	scale    float32
	offset   int32
}

// cBwAxisScaleOffset is Qnn_BwAxisScaleOffset_t (32 B).
type cBwAxisScaleOffset struct {
	bitwidth    uint32
	axis        int32
	numElements uint32
	_           uint32
	scales      *float32
	offsets     *int32
}

// cTensor is Qnn_Tensor_t (144 B) with the V1/V2 union flattened; V1
// tensors end at byte 120.
type cTensor struct {
	version    uint32 // @0
	_          uint32
	id         uint32 // @8
	_          uint32
	name       *byte           // @16
	tensorType uint32          // @24
	dataFormat uint32          // @28
	dataType   uint32          // @32
	_          uint32          //
	quant      cQuantizeParams // @40
	rank       uint32          // @80
	_          uint32
	dimensions *uint32 // @88
	memType    uint32  // @96
	_          uint32
	data       uintptr // @104 clientBuf.data / memHandle / retrieveRaw
	dataSize   uint32  // @112 clientBuf.dataSize
	_          uint32
	isDynamic  *uint8 // @120 (V2)
	sparseType uint32 // @128 (V2)
	sparseNum  uint32 // @132
	sparseDims uint32 // @136
	isProduced uint8  // @140
	_          [3]byte
}

const tensorStride = unsafe.Sizeof(cTensor{}) // 144

// Qnn_TensorMemType_t.
const (
	tensorMemRaw       = 0
	tensorMemMemHandle = 1
)

// cBinaryInfoV12 is QnnSystemContext_BinaryInfo_t for versions 1 and 2 (the
// version word included; 144 B).
type cBinaryInfoV12 struct {
	version            uint32 // @0
	_                  uint32
	backendID          uint32 // @8
	_                  uint32
	buildID            *byte    // @16
	coreAPI            cVersion // @24
	backendAPI         cVersion // @36
	socVersion         *byte    // @48
	hwInfoBlobVersion  cVersion // @56
	contextBlobVersion cVersion // @68
	hwInfoBlobSize     uint32   // @80
	_                  uint32
	hwInfoBlob         unsafe.Pointer // @88
	contextBlobSize    uint64         // @96
	numContextTensors  uint32         // @104
	_                  uint32
	contextTensors     unsafe.Pointer // @112
	numGraphs          uint32         // @120
	_                  uint32
	graphs             unsafe.Pointer // @128
	platformInfo       unsafe.Pointer // @136 (V2 only)
}

// cBinaryInfoV3 is QnnSystemContext_BinaryInfo_t version 3 (144 B).
type cBinaryInfoV3 struct {
	version             uint32 // @0
	_                   uint32
	backendID           uint32 // @8
	_                   uint32
	buildID             *byte    // @16
	coreAPI             cVersion // @24
	backendAPI          cVersion // @36
	socVersion          *byte    // @48
	contextBlobVersion  cVersion // @56
	_                   uint32
	contextBlobSize     uint64 // @72
	numContextTensors   uint32 // @80
	_                   uint32
	contextTensors      unsafe.Pointer // @88
	numGraphs           uint32         // @96
	_                   uint32
	graphs              unsafe.Pointer // @104
	platformInfo        unsafe.Pointer // @112
	contextMetadataSize uint32         // @120
	_                   uint32
	contextMetadata     unsafe.Pointer // @128
	socModel            uint32         // @136
	_                   uint32
}

// cGraphInfo is QnnSystemContext_GraphInfo_t (88 B stride in QAIRT 2.43;
// versions 1-3 share the head, V2 adds @48/@56, V3 adds @64-@84).
type cGraphInfo struct {
	version       uint32 // @0
	_             uint32
	name          *byte // @8
	numInputs     uint32
	_             uint32
	inputs        unsafe.Pointer // @24
	numOutputs    uint32         // @32
	_             uint32
	outputs       unsafe.Pointer // @40
	numUpdateable uint32         // @48
	_             uint32
	updateable    unsafe.Pointer // @56
	blobInfoSize  uint32         // @64
	_             uint32
	blobInfo      unsafe.Pointer // @72
	startOpIndex  uint32         // @80
	endOpIndex    uint32         // @84
}

const graphInfoStride = unsafe.Sizeof(cGraphInfo{}) // 88

// cMemDescriptor is Qnn_MemDescriptor_t (48 B).
type cMemDescriptor struct {
	numDim      uint32 // @0 memShape.numDim
	_           uint32
	dimSize     *uint32 // @8
	shapeConfig *byte   // @16
	dataType    uint32  // @24
	memType     uint32  // @28 Qnn_MemType_t
	info        uintptr // @32 ionInfo.fd (int32) / customInfo pointer / dmaBuf fd
	dmaBufData  uintptr // @40
}

// Qnn_MemType_t.
const (
	memTypeION    = 1
	memTypeCustom = 2
)

// cMemHtpDescriptor is QnnMemHtp_Descriptor_t (32 B), the custom info of a
// CUSTOM memory descriptor.
type cMemHtpDescriptor struct {
	typ    uint32 // @0 (1 = SHARED_BUFFER)
	_      uint32
	size   uint64 // @8 size of the whole allocation
	fd     int32  // @16 sharedBufferConfig.fd
	_      uint32
	offset uint64 // @24 sharedBufferConfig.offset
}

const memHtpSharedBuffer = 1

// cHtpInfrastructure is QnnHtpDevice_Infrastructure_t (40 B): the perf
// function table returned by deviceGetInfrastructure.
type cHtpInfrastructure struct {
	infraType            uint32 // @0 (0 = PERF)
	_                    uint32
	createPowerConfigID  uintptr // @8
	destroyPowerConfigID uintptr // @16
	setPowerConfig       uintptr // @24
	setMemoryConfig      uintptr // @32
}

// cPowerConfig is QnnHtpPerfInfrastructure_PowerConfig_t (68 B, align 4)
// with the DCVS_V3 union member spelled out. For the RPC options the single
// u32 value sits at @4 (contextID).
type cPowerConfig struct {
	option          uint32 // @0
	contextID       uint32 // @4 (DCVS_V3) or rpcControlLatency / rpcPollingTime
	setDcvsEnable   uint32 // @8
	dcvsEnable      uint32 // @12
	powerMode       uint32 // @16
	setSleepLatency uint32 // @20
	sleepLatency    uint32 // @24
	setSleepDisable uint32 // @28
	sleepDisable    uint32 // @32
	setBusParams    uint32 // @36
	busCornerMin    uint32 // @40
	busCornerTarget uint32 // @44
	busCornerMax    uint32 // @48
	setCoreParams   uint32 // @52
	coreCornerMin   uint32 // @56
	coreCornerTgt   uint32 // @60
	coreCornerMax   uint32 // @64
}

// Power config options.
const (
	powerOptDCVSv3            = 1
	powerOptRPCControlLatency = 2
	powerOptRPCPollingTime    = 3
)

// cPlatformInfo is QnnDevice_PlatformInfo_t (24 B): version @0, V1
// {numHwDevices @8, hwDevices @16}. Layout from the public QnnDevice.h, not
// measured (UNCONFIRMED on a device).
type cPlatformInfo struct {
	version      uint32
	_            uint32
	numHwDevices uint32
	_            uint32
	hwDevices    unsafe.Pointer
}

// cHwDeviceInfo is QnnDevice_HardwareDeviceInfo_t (40 B): version @0, V1
// {deviceId @8, deviceType @12, numCores @16, cores @24, extension @32}.
type cHwDeviceInfo struct {
	version    uint32
	_          uint32
	deviceID   uint32
	deviceType uint32
	numCores   uint32
	_          uint32
	cores      unsafe.Pointer
	extension  unsafe.Pointer // *QnnHtpDevice_DeviceInfoExtension_t for HTP
}

// cHtpDeviceInfoExt is QnnHtpDevice_DeviceInfoExtension_t (32 B): devType @0
// (0 = ON_CHIP), onChipDevice {vtcmSize size_t @8, socModel @16,
// signedPdSupport @20, dlbcSupport @21, arch @24}.
type cHtpDeviceInfoExt struct {
	devType         uint32
	_               uint32
	vtcmSize        uint64
	socModel        uint32
	signedPdSupport uint8
	dlbcSupport     uint8
	_               [2]byte
	arch            uint32
	_               uint32
}
