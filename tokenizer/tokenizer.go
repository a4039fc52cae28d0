// Package tokenizer is a pure-Go byte-level BPE tokenizer for Hugging Face
// tokenizer.json files of the Llama-3 family (Llama 3, 3.1, 3.2). It gives
// the same ids as HF tokenizers (Rust, Oniguruma regex engine) by
// construction: the Llama-3 split regex is a hand-written scanner with
// Oniguruma's leftmost-first backtracking semantics and Unicode classes.
//
// # Special tokens
//
// Encode(text, addBOS, parseSpecial=true) is HF's default
// (split_special_tokens=false): added-token strings such as "<|eot_id|>" in
// text become their ids. Use it only for text the server itself produced,
// for example a chat prompt rendered by the template. With parseSpecial=false
// the same strings are ordinary text (as with split_special_tokens=true).
//
// A chat renderer must not let user content inject special tokens, so it
// should use EncodeSegments: template structure goes in Special segments,
// message content in plain ones. Each segment is pre-tokenized on its own,
// and BPE merges never cross pre-token boundaries, so the result equals the
// whole-string Encode(rendered, addBOS, true) exactly when (1) every segment
// boundary is also a pre-token boundary of the whole string and (2) no
// special-token string lies inside or across plain segments. A boundary
// satisfies (1) when a special token is on either side of it, or when the
// text before it ends with '\r' or '\n' and the text after it starts with a
// non-whitespace rune. The Llama-3.x template puts trimmed content between
// "<|end_header_id|>\n\n" (or the tool list's "\n\n") and "<|eot_id|>", so
// its prompts encode the same both ways (tested on testdata/chat goldens).
// Elsewhere, e.g. a boundary between two letters, the results can differ.
//
// # Decoding
//
// Decode maps ids to bytes with the ByteLevel decoder and returns them as a
// string, replacing invalid UTF-8 like Rust's String::from_utf8_lossy (one
// U+FFFD per maximal invalid subpart). It does not apply transformers'
// clean_up_tokenization pass. StreamDecoder yields the same text
// incrementally, holding back an incomplete trailing UTF-8 character.
//
// A Tokenizer is safe for concurrent use.
package tokenizer

import (
	"strings"
	"sync"
)

// Specials holds the ids of the Llama-3 control tokens, -1 when absent.
type Specials struct {
	BOS       int32 // <|begin_of_text|>
	EOT       int32 // <|eot_id|>
	EOM       int32 // <|eom_id|>
	PythonTag int32 // <|python_tag|>
	EndOfText int32 // <|end_of_text|>
}

// Segment is a piece of text for EncodeSegments. Special segments are parsed
// for special-token strings; plain segments are encoded as ordinary text.
type Segment struct {
	Text    string
	Special bool
}

// Tokenizer encodes text to token ids and back.
type Tokenizer struct {
	vocab        map[string]int32  // raw bytes of a BPE token -> id
	other        map[string]int32  // BPE tokens that are not byte-level strings
	byteID       [256]int32        // single-byte token ids
	merges       map[uint64]uint64 // pairKey -> rank<<32 | merged id
	ignoreMerges bool

	tokens  []string // id -> token string ("" when absent)
	pieces  []string // id -> decoded bytes, while loading
	blob    []byte   // all decoded bytes; id's are blob[off[id]:off[id+1]]
	off     []uint32
	longest int // bytes of the longest piece
	present []bool
	special []bool
	added   map[string]int32

	passes []*matcher // added-token matchers: non-normalized, then normalized

	prefix, suffix []int32 // TemplateProcessing around $A
	specials       Specials

	encoders sync.Pool
}

// Encode returns the ids of text. addBOS applies the post-processor template
// (HF add_special_tokens; for Llama 3 that prepends <|begin_of_text|> and
// never appends an EOS). parseSpecial makes special-token strings in text
// map to their ids; see the package doc.
func (t *Tokenizer) Encode(text string, addBOS, parseSpecial bool) []int32 {
	return t.EncodeSegments([]Segment{{Text: text, Special: parseSpecial}}, addBOS)
}

// EncodeSegments encodes each segment on its own and concatenates the ids;
// see the package doc for when this equals encoding the joined text.
func (t *Tokenizer) EncodeSegments(segs []Segment, addBOS bool) []int32 {
	n := 0
	for _, s := range segs {
		n += len(s.Text)
	}
	out := make([]int32, 0, n/3+len(t.prefix)+len(t.suffix)+1)
	if addBOS {
		out = append(out, t.prefix...)
	}
	e := t.encoder()
	for _, s := range segs {
		out = e.encodeText(s.Text, t.passes, s.Special, out)
	}
	t.encoders.Put(e)
	if addBOS {
		out = append(out, t.suffix...)
	}
	return out
}

// VocabSize is the number of ids, including added tokens (128256 for Llama 3).
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// MaxPieceBytes is the byte length of the longest token: a text of n bytes
// encodes to at least n/MaxPieceBytes tokens.
func (t *Tokenizer) MaxPieceBytes() int { return t.longest }

// TokenID returns the id of a token string: an added token's content, or a
// BPE token in its byte-level form (for example "Ġhello").
func (t *Tokenizer) TokenID(s string) (int32, bool) {
	if id, ok := t.added[s]; ok {
		return id, true
	}
	id, ok, _ := t.modelID(s, nil)
	return id, ok
}

// TokenString returns the raw token string of id (byte-level encoded for BPE
// tokens).
func (t *Tokenizer) TokenString(id int32) (string, bool) {
	if !t.valid(id) {
		return "", false
	}
	return t.tokens[id], true
}

// Piece returns the bytes Decode emits for id, or nil for an unknown id. The
// slice is shared and must not be modified (appending to it is safe).
func (t *Tokenizer) Piece(id int32) []byte {
	if !t.valid(id) {
		return nil
	}
	return t.piece(id)
}

func (t *Tokenizer) piece(id int32) []byte {
	a, b := t.off[id], t.off[id+1]
	return t.blob[a:b:b]
}

// IsSpecial reports whether id is a special added token.
func (t *Tokenizer) IsSpecial(id int32) bool { return t.valid(id) && t.special[id] }

// Specials returns the ids of the Llama-3 control tokens.
func (t *Tokenizer) Specials() Specials { return t.specials }

func (t *Tokenizer) valid(id int32) bool { return id >= 0 && int(id) < len(t.present) && t.present[id] }

// Decode returns the text of ids. Unknown ids are dropped, and so are special
// tokens when skipSpecial is set.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) string {
	var b []byte
	for _, id := range ids {
		if t.valid(id) && !(skipSpecial && t.special[id]) {
			b = append(b, t.piece(id)...)
		}
	}
	return lossyString(b)
}

// encoder holds per-goroutine scratch space and the word cache.
type encoder struct {
	t     *Tokenizer
	sym   []int32
	rank  []uint64
	cache map[string]uint64 // word -> offset<<32 | length in arena
	arena []int32
	node  []node
	heap  []uint64
}

// Word cache bounds; the cache is simply emptied when it is full.
var (
	maxCacheWords = 1 << 16
	maxArena      = 1 << 20
)

const noMerge = ^uint64(0)

func (t *Tokenizer) encoder() *encoder {
	if e, ok := t.encoders.Get().(*encoder); ok {
		return e
	}
	return &encoder{t: t, cache: make(map[string]uint64)}
}

// encodeText splits text at added tokens of the first pass and encodes the
// rest with the remaining passes, then the pre-tokenizer and BPE. As in HF,
// a special token found while parseSpecial is off stays ordinary text, and
// the search resumes after it (so it also hides overlapping added tokens).
func (e *encoder) encodeText(s string, passes []*matcher, parseSpecial bool, out []int32) []int32 {
	if len(passes) == 0 {
		for i := 0; i < len(s); {
			j := splitNext(s, i)
			out = e.word(s[i:j], out)
			i = j
		}
		return out
	}
	m, rest := passes[0], passes[1:]
	text := 0 // start of the text not yet encoded
	for from := 0; ; {
		start, end, id, ok := m.find(s, from)
		if !ok {
			return e.encodeText(s[text:], rest, parseSpecial, out)
		}
		from = end
		if !parseSpecial && e.t.special[id] {
			continue
		}
		out = e.encodeText(s[text:start], rest, parseSpecial, out)
		out = append(out, id)
		text = end
	}
}

// word appends the BPE ids of one pre-token.
func (e *encoder) word(w string, out []int32) []int32 {
	t := e.t
	if len(w) == 1 {
		return append(out, t.byteID[w[0]])
	}
	if t.ignoreMerges {
		if id, ok := t.vocab[w]; ok {
			return append(out, id)
		}
	}
	if v, ok := e.cache[w]; ok {
		return append(out, e.arena[v>>32:v>>32+v&0xffffffff]...)
	}
	var ids []int32
	if len(w) <= heapThreshold {
		ids = e.mergeScan(w)
	} else {
		ids = e.mergeHeap(w)
	}
	if len(e.cache) >= maxCacheWords || len(e.arena)+len(ids) > maxArena {
		clear(e.cache)
		e.arena = e.arena[:0]
	}
	if len(ids) <= maxArena {
		e.cache[strings.Clone(w)] = uint64(len(e.arena))<<32 | uint64(len(ids))
		e.arena = append(e.arena, ids...)
	}
	return append(out, ids...)
}
