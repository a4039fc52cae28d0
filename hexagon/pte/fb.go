package pte

import (
	"encoding/binary"
	"fmt"
	"math"
)

// fb reads the flatbuffer wire format with every access bounds-checked. A
// bad offset panics with a fbError, which parse turns into an error; this
// keeps the schema walk readable.
type fb struct {
	b    []byte
	name string // "program" or "compile spec", for errors
	// budget bounds the vector elements one parse may decode, so that
	// vectors pointing at the same data many times cannot make a small file
	// cost more than a few times its size in work and memory.
	budget *int
}

func newFB(b []byte, name string) fb {
	n := 4*len(b) + 1024
	return fb{b: b, name: name, budget: &n}
}

type fbError struct{ msg string }

func (f fb) fail(format string, a ...any) { panic(fbError{fmt.Sprintf(format, a...)}) }

func (f fb) need(at, n int, what string) {
	if at < 0 || n < 0 || at > len(f.b) || n > len(f.b)-at {
		f.fail("%s at offset %d (+%d bytes) is outside the %d-byte %s", what, at, n, len(f.b), f.name)
	}
}

func (f fb) u8(at int) uint8   { f.need(at, 1, "byte"); return f.b[at] }
func (f fb) u16(at int) uint16 { f.need(at, 2, "u16"); return binary.LittleEndian.Uint16(f.b[at:]) }
func (f fb) u32(at int) uint32 { f.need(at, 4, "u32"); return binary.LittleEndian.Uint32(f.b[at:]) }
func (f fb) u64(at int) uint64 { f.need(at, 8, "u64"); return binary.LittleEndian.Uint64(f.b[at:]) }

// deref follows the uoffset stored at at.
func (f fb) deref(at int, what string) int {
	p := int64(at) + int64(f.u32(at))
	if p >= int64(len(f.b)) {
		f.fail("%s offset points past the %s (%d ≥ %d)", what, f.name, p, len(f.b))
	}
	return int(p)
}

// tbl is a table at a position of the buffer.
type tbl struct {
	f    fb
	pos  int
	vt   int
	vtn  int // vtable length in bytes
	what string
}

func (f fb) table(pos int, what string) tbl {
	vt := int64(pos) - int64(int32(f.u32(pos)))
	if vt < 0 || vt > int64(len(f.b))-4 {
		f.fail("%s: vtable offset %d is outside the %s", what, vt, f.name)
	}
	n := int(f.u16(int(vt)))
	if n < 4 || n%2 != 0 {
		f.fail("%s: vtable size %d is invalid", what, n)
	}
	f.need(int(vt), n, what+" vtable")
	tsize := int(f.u16(int(vt) + 2))
	f.need(pos, tsize, what)
	return tbl{f: f, pos: pos, vt: int(vt), vtn: n, what: what}
}

// field returns the absolute position of field id, or 0 when absent.
func (t tbl) field(id int) int {
	slot := 4 + 2*id
	if slot+2 > t.vtn {
		return 0
	}
	off := int(t.f.u16(t.vt + slot))
	if off == 0 {
		return 0
	}
	return t.pos + off
}

func (t tbl) u8(id int) uint8 {
	if p := t.field(id); p != 0 {
		return t.f.u8(p)
	}
	return 0
}

func (t tbl) boolean(id int) bool { return t.u8(id) != 0 }

func (t tbl) i32(id int) int32 {
	if p := t.field(id); p != 0 {
		return int32(t.f.u32(p))
	}
	return 0
}

func (t tbl) u32(id int) uint32 { return uint32(t.i32(id)) }

func (t tbl) u64(id int) uint64 {
	if p := t.field(id); p != 0 {
		return t.f.u64(p)
	}
	return 0
}

func (t tbl) f64(id int) float64 { return math.Float64frombits(t.u64(id)) }

// sub returns the table field id, and whether it is present.
func (t tbl) sub(id int, what string) (tbl, bool) {
	p := t.field(id)
	if p == 0 {
		return tbl{}, false
	}
	return t.f.table(t.f.deref(p, what), what), true
}

// vec returns the position of the first element and the length of vector
// field id (0, 0 when absent), checking that n elements of size fit.
func (t tbl) vec(id, size int, what string) (int, int) {
	p := t.field(id)
	if p == 0 {
		return 0, 0
	}
	v := t.f.deref(p, what)
	n := int(t.f.u32(v))
	if n < 0 || int64(n)*int64(size) > int64(len(t.f.b)-v-4) {
		t.f.fail("%s: %d elements of %d bytes do not fit in the %s", what, n, size, t.f.name)
	}
	if *t.f.budget -= n; *t.f.budget < 0 {
		t.f.fail("%s: the %s references more data than it holds (shared vectors?)", what, t.f.name)
	}
	return v + 4, n
}

func (t tbl) str(id int, what string) string {
	p, n := t.vec(id, 1, what)
	return string(t.f.b[p : p+n])
}

func (t tbl) bytes(id int, what string) []byte {
	p, n := t.vec(id, 1, what)
	return t.f.b[p : p+n : p+n]
}

func (t tbl) i32s(id int, what string) []int32 { return ints[int32](t, id, what) }

func (t tbl) i64s(id int, what string) []int64 { return ints[int64](t, id, what) }

// ints reads vector field id of little-endian int32s or int64s.
func ints[T int32 | int64](t tbl, id int, what string) []T {
	size := binary.Size(T(0))
	p, n := t.vec(id, size, what)
	out := make([]T, n)
	binary.Decode(t.f.b[p:p+n*size], binary.LittleEndian, out)
	return out
}

// tables returns the tables of vector field id.
func (t tbl) tables(id int, what string) []tbl {
	p, n := t.vec(id, 4, what)
	out := make([]tbl, n)
	for i := range out {
		out[i] = t.f.table(t.f.deref(p+4*i, what), fmt.Sprintf("%s[%d]", what, i))
	}
	return out
}
