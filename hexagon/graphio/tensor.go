package graphio

import (
	"fmt"
	"strings"

	"github.com/hexserve/hexserve/hexagon/qnn"
)

// Tensor is a graph tensor bound to a runtime buffer.
type Tensor struct {
	Info qnn.TensorInfo
	Elem Elem
	Buf  *qnn.Buffer
	B    []byte // the first Info.Bytes() (or the allocated size) of Buf
}

// Alloc gives t a zeroed runtime buffer of n bytes (rpcmem registered with
// the backend where it supports shared memory).
func (t *Tensor) Alloc(rt *qnn.Runtime, n int) error {
	b, err := rt.Alloc(n)
	if err != nil {
		return fmt.Errorf("allocating %d bytes: %w", n, err)
	}
	t.Buf, t.B = b, b.Bytes()[:n]
	clear(t.B)
	return nil
}

// Free releases t's buffer (nil-safe, idempotent).
func (t *Tensor) Free() {
	if t != nil && t.Buf != nil {
		t.Buf.Free()
		t.Buf, t.B = nil, nil
	}
}

// Find returns the tensor named name in list.
func Find(list []qnn.TensorInfo, name string) (qnn.TensorInfo, bool) {
	for _, t := range list {
		if t.Name == name {
			return t, true
		}
	}
	return qnn.TensorInfo{}, false
}

// Names lists the tensors' names, for messages.
func Names(list []qnn.TensorInfo) string {
	var s []string
	for _, t := range list {
		s = append(s, t.Name)
	}
	return strings.Join(s, ", ")
}
