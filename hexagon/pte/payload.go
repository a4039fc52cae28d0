package pte

import (
	"encoding/binary"
	"fmt"
)

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

// parsePayloadHeader reads a QNN payload's header. The context binary starts
// at 256 when the payload is 256+size bytes, and at 20 when it is 20+size
// (files from before ExecuTorch #17326).
func parsePayloadHeader(p []byte) (PayloadHeader, error) {
	if len(p) < LegacyPayloadHeaderSize {
		return PayloadHeader{}, fmt.Errorf("QNN payload of %d bytes is shorter than its %d-byte header", len(p), LegacyPayloadHeaderSize)
	}
	h := PayloadHeader{
		Magic:     binary.LittleEndian.Uint32(p),
		Signature: int64(binary.LittleEndian.Uint64(p[4:])),
		Size:      binary.LittleEndian.Uint64(p[12:]),
	}
	if h.Magic != PayloadMagic {
		return h, fmt.Errorf("QNN payload magic 0x%08X is not the context protocol's 0x%08X (online-prepare DLC payloads are not supported)", h.Magic, uint32(PayloadMagic))
	}
	switch n := uint64(len(p)); {
	case h.Size <= n && n-h.Size == PayloadHeaderSize:
		h.Len = PayloadHeaderSize
	case h.Size <= n && n-h.Size == LegacyPayloadHeaderSize:
		h.Len = LegacyPayloadHeaderSize
	default:
		return h, fmt.Errorf("QNN payload of %d bytes does not hold a %d-byte context binary behind a %d- or %d-byte header",
			n, h.Size, PayloadHeaderSize, LegacyPayloadHeaderSize)
	}
	return h, nil
}
