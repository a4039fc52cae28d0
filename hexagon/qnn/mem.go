package qnn

import (
	"fmt"
	"unsafe"
)

// Registration kinds follow ExecuTorch's QNN backend: the kind belongs to
// the allocation, never to the view. A Buffer from Alloc holds one tensor
// and is registered once per context as ION (its fd); a Buffer from
// AllocPool holds tensors at offsets, or one region that graphs view with
// different shapes, and each distinct view is registered as CUSTOM (an HTP
// shared buffer: fd, offset and the size of the whole allocation). QNN
// refuses to register one allocation both ways (8002 ALREADY_REGISTERED).

// regKey identifies one registration of a context: an Alloc buffer has one
// (offset, dtype and dims are zero), an AllocPool buffer one per view.
type regKey struct {
	buf    *Buffer
	offset int
	dtype  DataType
	dims   string
}

type registration struct {
	key   regKey
	dtype DataType
	dims  string
	h     memHandle // 0: memRegister failed and the tensor uses a client buffer
	refs  int
	cdims unsafe.Pointer // the C shape array handed to memRegister
}

// register returns the registration of t's view at offset in b, creating
// it when the context has none (ExecuTorch's already-registered check).
// When memRegister fails the registration is kept with no handle, and one
// warning naming the tensor and the error is logged: the tensor is passed
// as a plain client buffer (a copy per execute on the phone) and no later
// Call retries it. A view that breaks the one-kind-per-allocation rule is
// an error.
func (c *Context) register(b *Buffer, offset int, t TensorInfo, where string) (*registration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	dims := fmt.Sprint(t.Dims)
	key := regKey{buf: b}
	if b.pool {
		key = regKey{b, offset, t.DataType, dims}
	}
	if reg, ok := c.regs[key]; ok {
		if reg.dtype != t.DataType || reg.dims != dims {
			return nil, fmt.Errorf("its buffer (from Alloc) is already registered in this context as %s %s; "+
				"a buffer that graphs view with different shapes must come from AllocPool", reg.dtype, reg.dims)
		}
		reg.refs++
		return reg, nil
	}
	reg := &registration{key: key, dtype: t.DataType, dims: dims, refs: 1}
	h, err := c.memRegister(b, offset, t, reg)
	if err != nil {
		c.rt.log.Warn().Err(err).Str("tensor", t.Name).
			Msg("qnn: " + where + ": shared-memory registration failed; using a client buffer (one copy per execute)")
	}
	reg.h = h
	c.regs[key] = reg
	return reg, nil
}

// memRegister registers t's view of b with the kind of b's allocation; the
// caller holds c.mu.
func (c *Context) memRegister(b *Buffer, offset int, t TensorInfo, reg *registration) (memHandle, error) {
	r := c.rt
	desc := (*cMemDescriptor)(cAlloc(unsafe.Sizeof(cMemDescriptor{})))
	defer cFree(unsafe.Pointer(desc))
	desc.numDim = uint32(len(t.Dims))
	if len(t.Dims) > 0 {
		reg.cdims = cAlloc(4 * uintptr(len(t.Dims)))
		copy(unsafe.Slice((*uint32)(reg.cdims), len(t.Dims)), t.Dims)
		desc.dimSize = (*uint32)(reg.cdims)
	}
	desc.dataType = uint32(t.DataType)
	if b.pool {
		htp := (*cMemHtpDescriptor)(cAlloc(unsafe.Sizeof(cMemHtpDescriptor{})))
		defer cFree(unsafe.Pointer(htp))
		*htp = cMemHtpDescriptor{typ: memHtpSharedBuffer, size: uint64(b.size), fd: b.fd, offset: uint64(offset)}
		desc.memType = memTypeCustom
		desc.info = uintptr(unsafe.Pointer(htp))
	} else {
		desc.memType = memTypeION
		desc.info = uintptr(uint32(b.fd))
	}
	var h memHandle
	if err := r.status("memRegister", r.core.memRegister(c.h, unsafe.Pointer(desc), 1, unsafe.Pointer(&h))); err != nil {
		cFree(reg.cdims)
		reg.cdims = nil
		return 0, err
	}
	return h, nil
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
	cFree(reg.cdims)
	reg.cdims = nil
	return err
}
