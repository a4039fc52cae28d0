package ptewrite

import (
	"encoding/binary"
	"math"
)

// builder lays a flatbuffer out front to back: a table's vtable, then the
// table, then its children, so every uoffset points forward (as the wire
// format requires) and the root table follows the file header, as in files
// ExecuTorch writes.
type builder struct{ buf []byte }

// object writes itself at the end of the buffer and returns the position a
// uoffset to it must point at.
type object func(b *builder) int

func (b *builder) pad(align int) {
	for len(b.buf)%align != 0 {
		b.buf = append(b.buf, 0)
	}
}

func (b *builder) putU32(at int, v uint32) { binary.LittleEndian.PutUint32(b.buf[at:], v) }

// table collects fields by schema id; fields left at their default are not
// written, as flatc does.
type table struct{ fields []field }

type field struct {
	id    int
	size  int // 1, 2, 4 or 8 for scalars; 0 for a reference
	bits  uint64
	child object
}

func (t *table) scalar(id, size int, bits uint64) *table {
	if bits != 0 {
		t.fields = append(t.fields, field{id: id, size: size, bits: bits})
	}
	return t
}

func (t *table) u8(id int, v uint8) *table { return t.scalar(id, 1, uint64(v)) }
func (t *table) boolean(id int, v bool) *table {
	if v {
		return t.scalar(id, 1, 1)
	}
	return t
}
func (t *table) i32(id int, v int32) *table   { return t.scalar(id, 4, uint64(uint32(v))) }
func (t *table) u32(id int, v uint32) *table  { return t.scalar(id, 4, uint64(v)) }
func (t *table) i64(id int, v int64) *table   { return t.scalar(id, 8, uint64(v)) }
func (t *table) u64(id int, v uint64) *table  { return t.scalar(id, 8, v) }
func (t *table) f64(id int, v float64) *table { return t.scalar(id, 8, math.Float64bits(v)) }

// ref adds a reference field (table, vector or string); nil is skipped.
func (t *table) ref(id int, o object) *table {
	if o != nil {
		t.fields = append(t.fields, field{id: id, child: o})
	}
	return t
}

func (t *table) object() object { return func(b *builder) int { return b.table(t) } }

func (b *builder) table(t *table) int {
	n := 0
	for _, f := range t.fields {
		n = max(n, f.id+1)
	}
	// Field layout inside the table (relative to its start, after the soffset):
	// widest first so that every field is naturally aligned once the table
	// start is 8-aligned.
	offs := make([]int, len(t.fields))
	pos := 4
	for _, size := range []int{8, 4, 0, 2, 1} {
		for i, f := range t.fields {
			if f.size != size {
				continue
			}
			w := size
			if w == 0 {
				w = 4
			}
			for pos%w != 0 {
				pos++
			}
			offs[i] = pos
			pos += w
		}
	}
	tsize := pos
	b.pad(2)
	vt := len(b.buf)
	b.buf = binary.LittleEndian.AppendUint16(b.buf, uint16(4+2*n))
	b.buf = binary.LittleEndian.AppendUint16(b.buf, uint16(tsize))
	slots := make([]uint16, n)
	for i, f := range t.fields {
		slots[f.id] = uint16(offs[i])
	}
	for _, s := range slots {
		b.buf = binary.LittleEndian.AppendUint16(b.buf, s)
	}
	// The table's first 8-byte field sits at start+offs, and offs of 8-byte
	// fields are multiples of 8, so an 8-aligned start aligns them all.
	b.pad(8)
	start := len(b.buf)
	b.buf = append(b.buf, make([]byte, tsize)...)
	binary.LittleEndian.PutUint32(b.buf[start:], uint32(int32(start-vt)))
	for i, f := range t.fields {
		at := start + offs[i]
		switch f.size {
		case 1:
			b.buf[at] = byte(f.bits)
		case 2:
			binary.LittleEndian.PutUint16(b.buf[at:], uint16(f.bits))
		case 4:
			binary.LittleEndian.PutUint32(b.buf[at:], uint32(f.bits))
		case 8:
			binary.LittleEndian.PutUint64(b.buf[at:], f.bits)
		}
	}
	for i, f := range t.fields {
		if f.child != nil {
			at := start + offs[i]
			b.putU32(at, uint32(f.child(b)-at))
		}
	}
	return start
}

// vectorHead writes a vector length so that the elements that follow are
// aligned to elem bytes, and returns the length's position.
func (b *builder) vectorHead(n, elem int) int {
	b.pad(4)
	for (len(b.buf)+4)%max(elem, 4) != 0 {
		b.buf = append(b.buf, 0)
	}
	at := len(b.buf)
	b.buf = binary.LittleEndian.AppendUint32(b.buf, uint32(n))
	return at
}

func str(s string) object {
	return func(b *builder) int {
		at := b.vectorHead(len(s), 1)
		b.buf = append(append(b.buf, s...), 0)
		return at
	}
}

func bytesVec(v []byte, align int) object {
	return func(b *builder) int {
		at := b.vectorHead(len(v), align)
		b.buf = append(b.buf, v...)
		return at
	}
}

// intVec is a vector of little-endian int32s or int64s.
func intVec[T int32 | int64](v []T) object {
	return func(b *builder) int {
		at := b.vectorHead(len(v), binary.Size(T(0)))
		b.buf, _ = binary.Append(b.buf, binary.LittleEndian, v)
		return at
	}
}

// tables writes a vector of tables: the offsets, then each table.
func tables(ts []*table) object {
	return func(b *builder) int {
		at := b.vectorHead(len(ts), 4)
		slots := len(b.buf)
		b.buf = append(b.buf, make([]byte, 4*len(ts))...)
		for i, t := range ts {
			p := b.table(t)
			b.putU32(slots+4*i, uint32(p-(slots+4*i)))
		}
		return at
	}
}
