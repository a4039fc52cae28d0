package qhexrt

import (
	"fmt"
	"unsafe"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/internal/half"
	"github.com/hexserve/hexserve/internal/modelfile"
)

// embedTable is the f16 embedding table [vocab, hidden], mmap'd read-only so
// it never enters the Go heap.
type embedTable struct {
	data          []byte
	vocab, hidden int
}

// openEmbed maps path and checks it holds vocab×hidden float16 values.
func openEmbed(path string, vocab, hidden int) (*embedTable, error) {
	data, err := modelfile.Map(path, 0)
	if err != nil {
		return nil, fmt.Errorf("embedding table: %w", err)
	}
	if want := vocab * hidden * 2; len(data) != want {
		modelfile.Unmap(data)
		return nil, fmt.Errorf("embedding table %s: %d bytes, want %d (f16 [%d, %d])", path, len(data), want, vocab, hidden)
	}
	return &embedTable{data: data, vocab: vocab, hidden: hidden}, nil
}

// row returns the raw f16 row of token id.
func (t *embedTable) row(id int32) ([]uint16, error) {
	if id < 0 || int(id) >= t.vocab {
		return nil, fmt.Errorf("token id %d outside the vocabulary [0, %d)", id, t.vocab)
	}
	off := int(id) * t.hidden * 2
	return unsafe.Slice((*uint16)(unsafe.Pointer(&t.data[off])), t.hidden), nil
}

// put writes the embedding of id into dst encoded as et; scratch holds hidden floats.
func (t *embedTable) put(dst []byte, id int32, et graphio.Elem, scratch []float32) error {
	r, err := t.row(id)
	if err != nil {
		return err
	}
	if et.Type == qnn.Float16 {
		copy(graphio.U16(dst), r)
		return nil
	}
	for i, h := range r {
		scratch[i] = half.ToFloat32(h)
	}
	et.Put(dst, scratch[:t.hidden])
	return nil
}

// Close unmaps the table.
func (t *embedTable) Close() error {
	if t == nil || t.data == nil {
		return nil
	}
	err := modelfile.Unmap(t.data)
	t.data = nil
	return err
}
