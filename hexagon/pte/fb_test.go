package pte

import (
	"encoding/binary"
	"strings"
	"testing"
)

// A vector of 1000 offsets to one table holding a 1000-element vector is
// 8 KB on disk but 10⁶ elements to decode: the budget stops it.
func TestFBBudget(t *testing.T) {
	const n = 1000
	b := make([]byte, 4044+4*n)
	le := binary.LittleEndian
	le.PutUint32(b[0:], 12)               // root table at 12
	copy(b[4:], []byte{6, 0, 8, 0, 4, 0}) // its vtable: one field at +4
	le.PutUint32(b[12:], 8)               // soffset to the vtable at 4
	le.PutUint32(b[16:], 4)               // field 0 → vector at 20
	le.PutUint32(b[20:], n)               // n offsets ...
	for i := 0; i < n; i++ {
		le.PutUint32(b[24+4*i:], uint32(4032-(24+4*i))) // ... all to the table at 4032
	}
	copy(b[4024:], []byte{6, 0, 8, 0, 4, 0}) // that table's vtable
	le.PutUint32(b[4032:], 8)
	le.PutUint32(b[4036:], 4) // field 0 → vector at 4040
	le.PutUint32(b[4040:], n) // n int32s
	defer func() {
		r := recover()
		fe, ok := r.(fbError)
		if !ok || !strings.Contains(fe.msg, "references more data than it holds") {
			t.Fatalf("recovered %v, want the budget error", r)
		}
	}()
	f := newFB(b, "program")
	total := 0
	for _, tb := range f.table(12, "root").tables(0, "items") {
		total += len(tb.i32s(0, "ints"))
	}
	t.Fatalf("decoded %d elements from a %d-byte buffer", total, len(b))
}
