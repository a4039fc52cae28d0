package qnn

import (
	"errors"
	"fmt"
	"unsafe"
)

// Code is a QNN error code: the low 16 bits of a Qnn_ErrorHandle_t.
type Code uint16

// Common QNN error codes (docs/qnn-abi.md section 8).
const (
	CodeSuccess                   Code = 0
	CodeNotSupported              Code = 1000
	CodeMemAlloc                  Code = 1002
	CodeSystem                    Code = 1003
	CodeInvalidArgument           Code = 1004
	CodeOperationNotPermitted     Code = 1005
	CodePlatformNotSupported      Code = 1006
	CodeSystemCommunication       Code = 1007 // DSP subsystem restart, recovered
	CodeIncompatibleBinaries      Code = 1008
	CodeLoadingBinaries           Code = 1009
	CodeResourceUnavailable       Code = 1010
	CodeSystemCommunicationFatal  Code = 1011 // DSP subsystem restart, not recovered
	CodeGeneral                   Code = 1100
	CodeBackendCannotInitialize   Code = 4000
	CodeContextInvalidArgument    Code = 5000
	CodeContextInvalidHandle      Code = 5002
	CodeContextBinaryVersion      Code = 5004
	CodeContextCreateFromBinary   Code = 5005
	CodeContextBinaryConfig       Code = 5008
	CodeGraphInvalidArgument      Code = 6000
	CodeGraphInvalidHandle        Code = 6001
	CodeGraphDoesNotExist         Code = 6002
	CodeGraphInvalidName          Code = 6003
	CodeGraphInvalidTensor        Code = 6004
	CodeTensorDoesNotExist        Code = 7002
	CodeTensorInvalidParam        Code = 7004
	CodeMemInvalidArgument        Code = 8000
	CodeMemInvalidHandle          Code = 8001
	CodeMemAlreadyRegistered      Code = 8002
	CodeMemMapping                Code = 8003
	CodeMemInvalidShape           Code = 8004
	CodeMemUnsupportedMemType     Code = 8005
	CodeDeviceInvalidHandle       Code = 14000
	CodeDeviceInvalidConfig       Code = 14001
	CodeDeviceHardwareUnavailable Code = 14002
	CodeDeviceAssociatedToContext Code = 14003
	CodeSystemInvalidHandle       Code = 30000
	CodeSystemInvalidArgument     Code = 30001
	CodeSystemOperationFailed     Code = 30002
	CodeSystemMalformedBinary     Code = 30010
)

var codeNames = map[Code]string{
	CodeSuccess:                   "SUCCESS",
	CodeNotSupported:              "NOT_SUPPORTED",
	CodeMemAlloc:                  "MEM_ALLOC",
	CodeSystem:                    "SYSTEM",
	CodeInvalidArgument:           "INVALID_ARGUMENT",
	CodeOperationNotPermitted:     "OPERATION_NOT_PERMITTED",
	CodePlatformNotSupported:      "PLATFORM_NOT_SUPPORTED",
	CodeSystemCommunication:       "SYSTEM_COMMUNICATION",
	CodeIncompatibleBinaries:      "INCOMPATIBLE_BINARIES",
	CodeLoadingBinaries:           "LOADING_BINARIES",
	CodeResourceUnavailable:       "RESOURCE_UNAVAILABLE",
	CodeSystemCommunicationFatal:  "SYSTEM_COMMUNICATION_FATAL",
	CodeGeneral:                   "GENERAL",
	CodeBackendCannotInitialize:   "BACKEND_CANNOT_INITIALIZE",
	CodeContextInvalidArgument:    "CONTEXT_INVALID_ARGUMENT",
	CodeContextInvalidHandle:      "CONTEXT_INVALID_HANDLE",
	CodeContextBinaryVersion:      "CONTEXT_BINARY_VERSION",
	CodeContextCreateFromBinary:   "CONTEXT_CREATE_FROM_BINARY",
	CodeContextBinaryConfig:       "CONTEXT_BINARY_CONFIGURATION",
	CodeGraphInvalidArgument:      "GRAPH_INVALID_ARGUMENT",
	CodeGraphInvalidHandle:        "GRAPH_INVALID_HANDLE",
	CodeGraphDoesNotExist:         "GRAPH_DOES_NOT_EXIST",
	CodeGraphInvalidName:          "GRAPH_INVALID_NAME",
	CodeGraphInvalidTensor:        "GRAPH_INVALID_TENSOR",
	CodeTensorDoesNotExist:        "TENSOR_DOES_NOT_EXIST",
	CodeTensorInvalidParam:        "TENSOR_INVALID_TENSOR_PARAM",
	CodeMemInvalidArgument:        "MEM_INVALID_ARGUMENT",
	CodeMemInvalidHandle:          "MEM_INVALID_HANDLE",
	CodeMemAlreadyRegistered:      "MEM_ALREADY_REGISTERED",
	CodeMemMapping:                "MEM_MAPPING",
	CodeMemInvalidShape:           "MEM_INVALID_SHAPE",
	CodeMemUnsupportedMemType:     "MEM_UNSUPPORTED_MEMTYPE",
	CodeDeviceInvalidHandle:       "DEVICE_INVALID_HANDLE",
	CodeDeviceInvalidConfig:       "DEVICE_INVALID_CONFIG",
	CodeDeviceHardwareUnavailable: "DEVICE_HARDWARE_UNAVAILABLE",
	CodeDeviceAssociatedToContext: "DEVICE_ASSOCIATED_TO_CONTEXT",
	CodeSystemInvalidHandle:       "SYSTEM_INVALID_HANDLE",
	CodeSystemInvalidArgument:     "SYSTEM_INVALID_ARGUMENT",
	CodeSystemOperationFailed:     "SYSTEM_OPERATION_FAILED",
	CodeSystemMalformedBinary:     "SYSTEM_MALFORMED_BINARY",
}

// String returns the QNN name of the code, or its number.
func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("QNN_ERROR_%d", uint16(c))
}

// Error is a failed QNN call.
type Error struct {
	Code    Code   // low 16 bits of Raw
	Raw     uint64 // the Qnn_ErrorHandle_t as returned
	Op      string // the QNN function, e.g. "graphExecute"
	Message string // errorGetMessage text, if the backend gave one
}

func (e *Error) Error() string {
	s := fmt.Sprintf("qnn: %s: error %d (%s)", e.Op, uint16(e.Code), e.Code)
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is reports whether target is an *Error with the same Code, so that
// errors.Is(err, &qnn.Error{Code: qnn.CodeGraphDoesNotExist}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// CodeOf returns the QNN code carried by err, or CodeSuccess when err holds
// no *Error.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeSuccess
}

// IsDeviceRestart reports whether err says that the DSP subsystem restarted
// (SYSTEM_COMMUNICATION 1007 or …_FATAL 1011). Contexts created before the
// restart are unusable: close them and load them again (for 1011, close and
// reopen the Runtime as well).
func IsDeviceRestart(err error) bool {
	c := CodeOf(err)
	return c == CodeSystemCommunication || c == CodeSystemCommunicationFatal
}

// status turns a QNN status into an error: nil for success, otherwise an
// *Error with the backend's message. It is the only place a status becomes
// an error. The message string is owned by the backend and copied here.
func (r *Runtime) status(op string, st uint64) error {
	if st&0xFFFF == 0 {
		return nil
	}
	e := &Error{Code: Code(st & 0xFFFF), Raw: st, Op: op}
	if r != nil && r.core.errorGetMessage != nil {
		var msg *byte
		if r.core.errorGetMessage(st, &msg)&0xFFFF == 0 {
			e.Message = goString(msg)
		}
	}
	return e
}

// goString copies a NUL-terminated C string.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}
