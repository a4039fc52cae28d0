package upstream

import (
	"errors"
	"io"
	"sync"
)

// DefaultBudget is the server-wide memory for buffered upstream replies
// when none is configured (server.relay_memory).
const DefaultBudget = 128 << 20

// DefaultMaxInFlight caps the requests forwarded to one upstream at once
// when upstream.max_in_flight is unset.
const DefaultMaxInFlight = 64

// Budget is the memory every Client sharing it may hold for upstream
// bytes at once: whole replies, the current line of a stream, the
// converted replies the Ollama and Anthropic relays collect. A nil
// *Budget is unlimited. It is safe for concurrent use.
type Budget struct {
	mu        sync.Mutex
	used, max int64
}

// NewBudget is a budget of max bytes; max <= 0 is DefaultBudget.
func NewBudget(max int64) *Budget {
	if max <= 0 {
		max = DefaultBudget
	}
	return &Budget{max: max}
}

// take reserves n bytes, or reports false when they are not free.
func (b *Budget) take(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

// give returns n reserved bytes.
func (b *Budget) give(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// Used is the memory reserved now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

var (
	errTooLarge = errors.New("the reply is larger than the limit")
	errBudget   = errors.New("the server's relay memory is in use")
)

// hold is the memory one request reserves from a Budget: the upstream's
// bytes up to the request's limit (max), and the copies made of them
// (copies, bounded by the Budget alone); release returns all of it.
type hold struct {
	b          *Budget
	held, max  int64
	copies     int64
	overBudget bool
}

// grow reserves n more bytes read from the upstream: errTooLarge past the
// request's limit, errBudget when the server's budget is spent.
func (h *hold) grow(n int64) error {
	if h.held+n > h.max {
		return errTooLarge
	}
	return h.take(n, &h.held)
}

// copy reserves n bytes for a copy of bytes already held (a joined line, a
// scrubbed reply): errBudget when the server's budget is spent. A copy
// does not count toward the request's limit, which caps the reply's size.
func (h *hold) copy(n int64) error { return h.take(n, &h.copies) }

// take reserves n bytes from the budget and adds them to *into.
func (h *hold) take(n int64, into *int64) error {
	if !h.b.take(n) {
		h.overBudget = true
		return errBudget
	}
	*into += n
	return nil
}

func (h *hold) release() {
	h.b.give(h.held + h.copies)
	h.held, h.copies = 0, 0
}

// readAll reads r to its end, each byte reserved in h first: a reply
// that never ends stops at h's limit (errTooLarge) or the server's budget
// (errBudget). It reads in fixed pieces and joins them once at the end
// (the join reserved too), so a long reply leaves no trail of outgrown
// buffers behind.
func (h *hold) readAll(r io.Reader) ([]byte, error) {
	var p pieces
	for {
		size := min(pieceSize, h.max-h.held)
		if size <= 0 {
			return nil, errTooLarge
		}
		if err := h.grow(size); err != nil {
			return nil, err
		}
		buf := make([]byte, size)
		n, err := io.ReadFull(r, buf)
		p.list = append(p.list, buf[:n])
		p.n += n
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return p.join(h)
		}
		if err != nil {
			return nil, err
		}
	}
}

// pieceSize is the unit a reply is read in.
const pieceSize = 64 << 10

// pieces are the parts of a reply or a line, read in order.
type pieces struct {
	list [][]byte
	n    int
}

// join is the pieces in one slice, reserved in h (a single piece needs no
// copy).
func (p *pieces) join(h *hold) ([]byte, error) {
	switch len(p.list) {
	case 0:
		return nil, nil
	case 1:
		return p.list[0], nil
	}
	if err := h.copy(int64(p.n)); err != nil {
		return nil, err
	}
	out := make([]byte, 0, p.n)
	for _, b := range p.list {
		out = append(out, b...)
	}
	p.list = nil
	return out, nil
}
