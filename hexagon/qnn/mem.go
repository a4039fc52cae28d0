package qnn

import (
	"fmt"
	"unsafe"
)

// regKey identifies one registration: the same region with the same shape
// and type is registered once per context and shared by Calls.
type regKey struct {
	buf    *Buffer
	offset int
	dtype  DataType
	dims   string
}

type registration struct {
	key  regKey
	h    memHandle
	refs int
	dims unsafe.Pointer // the C shape array handed to memRegister
}

// register returns the registration of t's region in b, creating it with
// memRegister when needed: memType ION with the buffer's fd when the tensor
// covers the whole buffer, else CUSTOM with an HTP SHARED_BUFFER descriptor
// (fd + offset).
func (c *Context) register(b *Buffer, offset int, t TensorInfo) (*registration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	key := regKey{b, offset, t.DataType, fmt.Sprint(t.Dims)}
	if reg, ok := c.regs[key]; ok {
		reg.refs++
		return reg, nil
	}
	r := c.rt
	desc := (*cMemDescriptor)(cAlloc(unsafe.Sizeof(cMemDescriptor{})))
	defer cFree(unsafe.Pointer(desc))
	reg := &registration{key: key}
	desc.numDim = uint32(len(t.Dims))
	if len(t.Dims) > 0 {
		reg.dims = cAlloc(4 * uintptr(len(t.Dims)))
		copy(unsafe.Slice((*uint32)(reg.dims), len(t.Dims)), t.Dims)
		desc.dimSize = (*uint32)(reg.dims)
	}
	desc.dataType = uint32(t.DataType)
	if offset == 0 && t.Bytes() == b.size {
		desc.memType = memTypeION
		desc.info = uintptr(uint32(b.fd))
	} else {
		htp := (*cMemHtpDescriptor)(cAlloc(unsafe.Sizeof(cMemHtpDescriptor{})))
		defer cFree(unsafe.Pointer(htp))
		*htp = cMemHtpDescriptor{typ: memHtpSharedBuffer, size: uint64(b.size), fd: b.fd, offset: uint64(offset)}
		desc.memType = memTypeCustom
		desc.info = uintptr(unsafe.Pointer(htp))
	}
	var h memHandle
	if err := r.status("memRegister", r.core.memRegister(c.h, unsafe.Pointer(desc), 1, unsafe.Pointer(&h))); err != nil {
		cFree(reg.dims)
		return nil, err
	}
	reg.h, reg.refs = h, 1
	c.regs[key] = reg
	return reg, nil
}

// deregister releases reg's handle; the caller holds c.mu.
func (c *Context) deregister(reg *registration) error {
	if reg.h == 0 {
		return nil
	}
	r := c.rt
	hs := (*memHandle)(cAlloc(unsafe.Sizeof(memHandle(0))))
	defer cFree(unsafe.Pointer(hs))
	*hs = reg.h
	err := r.status("memDeRegister", r.core.memDeRegister(unsafe.Pointer(hs), 1))
	reg.h = 0
	cFree(reg.dims)
	reg.dims = nil
	return err
}
