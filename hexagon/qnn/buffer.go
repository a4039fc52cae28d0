package qnn

import (
	"fmt"
	"math"
	"unsafe"
)

// rpcmem heap and flags used by every public caller (docs/qnn-abi.md section 6).
const (
	rpcmemHeapSystem  = 25
	rpcmemFlagDefault = 1
)

// Buffer is memory outside the Go heap that graphs read and write: rpcmem
// shared memory when libcdsprpc.so is loaded, else libc memory. It is
// zeroed at allocation.
type Buffer struct {
	rt   *Runtime
	ptr  unsafe.Pointer
	size int
	fd   int32 // rpcmem fd, -1 for libc memory
	pool bool  // from AllocPool: tensors at offsets, registered as HTP shared buffers
	uses int   // live Calls binding it (guarded by rt.mu)
}

// Alloc returns a zeroed buffer of size bytes for one tensor: Bind takes it
// at offset 0 only, and with shared memory it is registered once per
// context (as ION), so every graph of a context must view it with the same
// data type and shape. Runtime.Close frees buffers that are still
// allocated.
func (r *Runtime) Alloc(size int) (*Buffer, error) {
	return r.alloc(size, false)
}

// AllocPool returns a zeroed buffer that holds several tensors at offsets,
// or one region that graphs view with different shapes (a KV cache shared by
// a prefill and a decode graph): with shared memory each distinct view is
// registered as an HTP shared buffer (fd + offset), as ExecuTorch's LLM
// runner does with its one rpcmem block.
func (r *Runtime) AllocPool(size int) (*Buffer, error) {
	return r.alloc(size, true)
}

func (r *Runtime) alloc(size int, pool bool) (*Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("qnn: alloc of %d bytes", size)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	b := &Buffer{rt: r, size: size, fd: -1, pool: pool}
	if r.rpc != nil {
		if size > math.MaxInt32 {
			return nil, fmt.Errorf("qnn: rpcmem_alloc of %d bytes exceeds 2 GiB", size)
		}
		b.ptr = r.rpc.alloc(rpcmemHeapSystem, rpcmemFlagDefault, int32(size))
		if b.ptr == nil {
			return nil, fmt.Errorf("qnn: rpcmem_alloc(%d bytes) failed", size)
		}
		b.fd = r.rpc.toFD(b.ptr)
		if b.fd < 0 {
			r.rpc.free(b.ptr)
			return nil, fmt.Errorf("qnn: rpcmem_to_fd failed for a %d-byte buffer", size)
		}
		clear(b.Bytes())
	} else {
		b.ptr = libc.f.calloc(1, uintptr(size))
		if b.ptr == nil {
			return nil, fmt.Errorf("qnn: calloc(%d bytes) failed", size)
		}
	}
	r.buffers[b] = struct{}{}
	return b, nil
}

// Bytes is a view of the buffer; it must not be used after Free.
func (b *Buffer) Bytes() []byte {
	if b.ptr == nil {
		return nil
	}
	return unsafe.Slice((*byte)(b.ptr), b.size)
}

// Len is the buffer's size in bytes.
func (b *Buffer) Len() int { return b.size }

// Free releases the buffer. It fails while a Call still binds it (close the
// Call or its Context first). Freeing twice is a no-op.
func (b *Buffer) Free() error {
	r := b.rt
	r.mu.Lock()
	defer r.mu.Unlock()
	if b.ptr == nil {
		return nil
	}
	if b.uses > 0 {
		return fmt.Errorf("qnn: buffer of %d bytes is still bound by %d call(s)", b.size, b.uses)
	}
	if b.fd >= 0 {
		r.rpc.free(b.ptr)
	} else {
		libc.f.free(b.ptr)
	}
	b.ptr = nil
	delete(r.buffers, b)
	return nil
}

// BufferBytes is the size of the buffers allocated and not yet freed (a
// model's runtime memory: its I/O and KV buffers).
func (r *Runtime) BufferBytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for b := range r.buffers {
		n += int64(b.size)
	}
	return n
}
