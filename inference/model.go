package inference

import (
	"context"
	"errors"
	"time"

	"github.com/hexserve/hexserve/inference/sample"
)

// ModelInfo describes a loaded model to the engine.
type ModelInfo struct {
	Name          string  // model name from the bundle
	VocabSize     int     // rows of the lm-head output (128,256 for Llama-3.2)
	ContextLen    int     // KV cache rows (512 on the seed bundle)
	PrefillWindow int     // tokens per prefill graph call (128 on the seed bundle)
	BOS           int32   // begin-of-text id
	EOS           []int32 // ids that end a turn (eot, eom, end_of_text)
}

// Model is what the engine needs from a model runner: its description and
// its KV cache as a pool of sequences (Batcher). hexagon implements it on QNN
// graphs; tests use fakes. Calls are never concurrent. One request at a time
// is MaxSequences 1 on the same scheduler, not another interface.
type Model interface {
	Info() ModelInfo
	Batcher
	Close() error
}

// Optional model capabilities (GraphTimer, SeqKVSnapshotter,
// SeqTokenRecorder) are discovered with a type assertion on the Model; a
// model without one keeps plain behaviour.

// Rows are the per-token logits of one Run of a Step.
type Rows interface {
	Len() int
	// Logits returns row i (the logits after seq[valid+i]); rows are asked
	// for in ascending order. The result is valid until the next call on
	// Rows or the model.
	Logits(ctx context.Context, i int) (sample.Logits, error)
}

// HeldRows are Rows whose Logits all stay valid until the next call on the
// model (not only until the next Logits call): one output buffer, or
// copies. The engine then reads a step's rows together and samples them in
// parallel; other Rows are read and sampled one after another.
type HeldRows interface {
	Rows
	// Held reports whether the rows' Logits stay valid together.
	Held() bool
}

// KVLayout identifies the format of saved rows: a snapshot is restored only
// into a model whose layout is equal.
type KVLayout struct {
	Identity string // model identity: file name, size and a hash of its header, graph shapes, dtypes
	RowBytes int    // bytes of one row over all layers, K and V
}

// Batcher is a model whose KV cache is a pool of slots that sequences own,
// so that several sequences advance in one step. Calls are never
// concurrent. A speculative verify is one sequence's Run of 1+k rows in a
// Step; a rollback of rejected draft rows is the next Run's Start.
//
// A sequence's rows are its positions 0, 1, …: the prompt, then generated
// tokens. Where a row's K/V live (its slot) is the model's business; a slot
// need not equal a position. The model guarantees isolation: a row attends
// only to its own sequence's rows (those a Fork shares included), never to
// another sequence's slots, and its logits do not depend on what else the
// step carries (bit-identical on float32 caches). The engine forks only
// within one Request.Owner.
//
// Per model kind: the .pte runner keeps one cache and runs a Step as one
// prefill_forward call whose rows carry their own input_pos and mask (or
// kv_forward calls when they are cheaper); a chunked QHexRT bundle writes
// cos/sin and the mask per row and runs its lm-head per asked-for row; a
// QHexRT-contract bundle gives each open sequence its own registered KV
// buffers and runs a Step's runs in turn (Sequences is how many buffer sets
// fit; Fork may copy).
type Batcher interface {
	BatchLimits() BatchLimits
	// Open starts an empty sequence and sets aside reserve slots for its
	// rows (reserve ≤ ContextLen). It fails with an error wrapping
	// ErrNoSlots when the pool cannot hold them now; the engine then waits
	// for a Release.
	Open(reserve int) (SeqID, error)
	// Fork starts a sequence whose rows [0, rows) are parent's (shared
	// while both hold them, or copied: the model's choice) and sets aside
	// reserve more slots for its own later rows. parent keeps its rows; a
	// Run of either never rewrites a shared row (Start ≥ rows for the fork).
	// ErrNoSlots as for Open.
	Fork(parent SeqID, rows, reserve int) (SeqID, error)
	// Step evaluates runs (at most one per sequence, together at most
	// BatchLimits().Rows tokens) and returns one Rows per run, in order.
	// Rows may be produced lazily (a separate lm-head graph runs per asked
	// row): within a run they are asked for in ascending order, runs in
	// any order, and a returned Logits is valid until the next Logits call
	// or the next call on the model. A failed Step leaves every run's rows
	// from Start on undefined (the engine retries no rows it did not
	// commit). ctx is checked between graph calls.
	Step(ctx context.Context, runs []Run) ([]Rows, error)
	// Grow sets aside more slots for id, so that it may hold rows rows in
	// all (shared ones included): in place, or by moving its own rows to
	// other slots. ErrNoSlots when the pool cannot hold them now: the
	// engine then lets the sequence wait, or releases a younger one and
	// evaluates its rows again later.
	Grow(id SeqID, rows int) error
	// Release ends a sequence and frees its slots at once (shared ones
	// when their last holder releases). Releasing an unknown id is a no-op.
	Release(id SeqID)
	// StepCost is the model's current estimate of one Step carrying rows
	// tokens in all (from measured call costs), for the engine's choice of
	// draft rows.
	StepCost(rows int) time.Duration
}

// CheapOpener is optional for a Batcher whose slots do not all cost the
// same (a .pte's last AR slots, which only kv_forward sees: while a row
// lives there every Step goes row by row). OpenCheap opens as Open, in the
// cheap slots when reserve fits in them, and fails with ErrNoSlots when it
// would fit but they are taken: the engine then releases its retained
// sequences (prefix-cache leftovers), oldest first, before it opens a
// sequence in the dear slots.
type CheapOpener interface {
	OpenCheap(reserve int) (SeqID, error)
}

// SeqID names a sequence in a Batcher's pool.
type SeqID uint32

// BatchLimits are a Batcher's fixed limits.
type BatchLimits struct {
	Sequences int // sequences that may be open at once (Fork ones included)
	Rows      int // tokens one Step may carry over all its runs
	Slots     int // slots in the pool, over all sequences
	// Auto is what Config.MaxSequences 0 (auto) resolves to: the sequences
	// this model serves best side by side; 0 takes Sequences.
	Auto int
	// Align > 1 states that a row's bits depend on the rows its run
	// evaluated before it in the same call (16-bit caches: a row reads its
	// run's earlier rows at the graph's precision, older rows from the
	// cache). The engine then evaluates a prompt in runs that start at
	// multiples of Align counted from 0, each whole in one Step, reuses
	// cached prompt rows (prefix cache, KV store, Fork) only up to such a
	// multiple, evaluates generated rows again one per run, and verifies no
	// draft rows, so that a seeded request repeats exactly, cold or warm,
	// alone or under load. At most Rows; 0 or 1: none.
	Align int
}

// alignDown is n cut to a multiple of l.Align (n when there is none).
func (l BatchLimits) alignDown(n int) int {
	if l.Align <= 1 {
		return n
	}
	return n - n%l.Align
}

// resolve is the sequences a configured max_sequences asks for: n, or Auto
// when n is 0 (auto).
func (l BatchLimits) resolve(n int) int {
	switch {
	case n > 0:
		return n
	case l.Auto > 0:
		return l.Auto
	}
	return l.Sequences
}

// Run is one sequence's rows in a Step: Tokens at positions Start,
// Start+1, … Rows [0, Start) of Seq must be committed (written by earlier
// runs, a Fork or RestoreSeqKV); rows from Start on are dropped and
// replaced, which is how rejected draft rows roll back. After the Step the
// sequence holds Start+len(Tokens) rows. Start+len(Tokens) must not exceed
// the sequence's shared rows plus its reserve (after any Grow).
type Run struct {
	Seq    SeqID
	Start  int
	Tokens []int32
}

// SeqTokenRecorder is optional for a model whose multi-token graph only
// starts at position 0 (QHexRT-contract bundles): after a restore, and when
// a new request takes over a finished sequence's rows, the engine tells it
// which tokens the rows it keeps hold, so it evaluates the rest of a prompt
// with the same graph calls as without them (on 16-bit caches a row's bits
// depend on which graph wrote it).
type SeqTokenRecorder interface {
	// RestoredTokens names the tokens of id's committed rows [0, len(toks));
	// rows past them are no longer committed.
	RestoredTokens(id SeqID, toks []int32)
}

// ContextShifter is optional for a Batcher whose positions are host inputs
// (the host writes the RoPE tables: Genie and QHexRT bundles), so that a
// sequence may go on past the compiled window as a ring buffer at the
// original positions, as Genie's sliding window does.
//
// Shift evicts n of id's committed rows that follow its first keep rows (the
// sink: BOS, system prompt, tool declarations; the same keep at every Shift
// of a sequence), the oldest first, and frees their slots for the
// sequence's next rows. Nothing is re-rotated or re-read: the kept rows stay
// where they are, and a later Run's Start is still the position of its
// first token, so after shifts a sequence holds fewer rows than its
// position (Start − evicted rows). The evicted rows still count in Grow's
// rows and in a Run's bound (its reserve plus the evicted rows); a Run may
// not start among them or in the sink. A sequence that holds rows forked
// from another copies them into its own slots before evicting any. Positions never pass MaxPositions(): there the engine renumbers by
// re-reading the kept tokens into a new sequence.
type ContextShifter interface {
	Shift(id SeqID, keep, n int) error
	// MaxPositions is the most positions the model was trained for
	// (config.json max_position_embeddings; 0: no limit known).
	MaxPositions() int
}

// ErrNoSlots reports that a Batcher's pool cannot hold a sequence now.
var ErrNoSlots = errors.New("inference: the model's cache pool has no free slots")

// SeqKVSnapshotter copies a sequence's committed KV rows out of the pool and
// back, for a store of many conversations' prefixes (host memory or disk).
// The row format is the model's own (KVLayout) but self-contained per row: a
// model whose cache is not row-major (the .pte runner's per-layer K is
// transposed, [n_kv, hd, S]) gathers each row's elements on save and
// scatters them on restore. The engine saves a sequence's committed rows
// before Release and restores a saved prefix into a new sequence before its
// first Run.
type SeqKVSnapshotter interface {
	KVLayout() KVLayout
	// SaveSeqKV copies rows [from, to) of id (committed ones) into dst.
	SaveSeqKV(id SeqID, from, to int, dst []byte) error
	// RestoreSeqKV copies src into rows [from, from+len(src)/RowBytes) of
	// id; from must not exceed its committed rows. They are then committed.
	RestoreSeqKV(id SeqID, from int, src []byte) error
}
