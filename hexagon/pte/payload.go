package pte

// QnnContextCustomProtocol (backends/qualcomm/runtime/backends/QnnCustomProtocol.h):
// a QNN delegate's payload is this header, then the raw context binary.
const (
	PayloadMagic = 0x5678ABCD
	// PayloadHeaderSize is the header padded to QNN_CTX_BIN_ALIGNMENT
	// (ExecuTorch #17326 and later).
	PayloadHeaderSize = 256
	// LegacyPayloadHeaderSize is the unpadded header of older files:
	// magic u32, signature i64, size u64.
	LegacyPayloadHeaderSize = 20
)

// PayloadHeader is a QNN delegate payload's header.
type PayloadHeader struct {
	Magic     uint32 `json:"magic"`
	Signature int64  `json:"signature"`
	Size      uint64 `json:"context_binary_size"`
	// Len is where the context binary starts in the payload: 256, or 20 in
	// older files.
	Len int `json:"header_len"`
}
