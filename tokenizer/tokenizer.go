// Package tokenizer is a pure-Go BPE tokenizer for Hugging Face
// tokenizer.json files that gives the same ids and text as HF tokenizers
// (Rust) by construction. It reads the forms these families use:
//
//   - byte-level BPE with the Split pre-tokenizer of Llama 3 (Llama3Pattern)
//     or of Qwen2/2.5/3 (Qwen2Pattern, with the NFC normalizer), or GPT-2's
//     ByteLevel pre-tokenizer (GPT2Pattern); each regex is a hand-written
//     scanner with Oniguruma's leftmost-first semantics and Unicode classes;
//   - SentencePiece-style BPE over characters with byte_fallback, unk_token
//     and fuse_unk (Llama 2, Mistral, Phi-3.5), with either the Metaspace
//     pre-tokenizer or the Llama-2 form (no pre-tokenizer, the normalizer
//     Prepend "▁" + Replace " " → "▁"), and a decoder of Replace,
//     ByteFallback, Fuse, Strip or Metaspace steps;
//   - added tokens with lstrip, rstrip, single_word and normalized, and a
//     TemplateProcessing post-processor that adds BOS (or none, as Qwen's).
//
// Parse refuses anything else naming the component, for example
// `pre_tokenizer.type "Whitespace" is not supported`: a file is never
// tokenized differently from HF.
//
// # Special tokens
//
// Encode(text, addBOS, parseSpecial=true) is HF's default
// (split_special_tokens=false): added-token strings such as "<|eot_id|>" in
// text become their ids. Use it only for text the server itself produced,
// for example a chat prompt rendered by the template. With parseSpecial=false
// the same strings are ordinary text (as with split_special_tokens=true).
//
// With parseSpecial=false, special-token text stays text for every kind of
// tokenizer: it is normalized, pre-tokenized and BPE-encoded like the rest,
// and on the supported families BPE does not reach a special token's id
// from it (TestFamiliesKeepUserTextPlain).
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
// An added token with rstrip (lstrip) takes the whitespace after (before)
// it from the next (previous) segments too, as in the joined text: Phi-3's
// "<|user|>" takes the template's "\n" that starts the plain segment after it.
// Elsewhere, e.g. a boundary between two letters, the results can differ.
//
// The rule is for the Llama-3 and Qwen2 splits. A SentencePiece-style
// tokenizer prepends "▁" to each piece of text between added tokens (the
// Llama-2 form, Metaspace "always") or to the first (Metaspace "first"), so
// there only a boundary next to a special token satisfies (1); and NFC may
// compose across a boundary before a combining mark.
//
// # Decoding
//
// For byte-level BPE, Decode maps ids to bytes with the ByteLevel decoder
// and returns them as a string, replacing invalid UTF-8 like Rust's
// String::from_utf8_lossy (one U+FFFD per maximal invalid subpart); for
// SentencePiece-style BPE it runs the file's decoder steps as HF does (one
// U+FFFD per byte of an invalid run of <0xXX> tokens, Strip of the leading
// space). Piece is a token's text inside a stream (" Hello" for "▁Hello",
// the raw byte for "<0x0A>"). It does not apply transformers'
// clean_up_tokenization pass. StreamDecoder yields the same text
// incrementally, holding back an incomplete trailing UTF-8 character.
//
// A Tokenizer is safe for concurrent use.
package tokenizer

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Specials holds the ids of the BOS and the Llama-3 control tokens, -1 when
// absent. Other families' tokens are found with TokenID and IsSpecial.
type Specials struct {
	BOS       int32 // what Encode's addBOS prepends (<|begin_of_text|>, <s>); -1 for Qwen
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
	vocab        map[string]int32  // token -> id: raw bytes (byte-level) or the token string
	other        map[string]int32  // byte-level: BPE tokens that are not byte-level strings
	byteID       [256]int32        // byte-level: single-byte token ids
	byteTok      [256]int32        // SentencePiece byte fallback: <0xXX> ids, -1 when absent
	merges       map[uint64]uint64 // pairKey -> rank<<32 | merged id
	ignoreMerges bool
	byteLevel    bool  // ByteLevel pre-tokenizer and decoder; else SentencePiece-style
	unk          int32 // unk_token id, -1 when none
	fuseUnk      bool

	norm     []normStep   // the normalizer
	pre      preTokenizer // the pre-tokenizer
	decoders []decodeStep // SentencePiece-style decoder steps

	tokens  []string // id -> token string ("" when absent)
	pieces  []string // id -> decoded bytes, while loading
	blob    []byte   // all decoded bytes; id's are blob[off[id]:off[id+1]]
	off     []uint32
	longest int // bytes of the longest piece
	present []bool
	special []bool
	added   map[string]int32
	addedAs map[int32]string // normalized added tokens whose normalized form differs

	unskipped map[int32]bool // special tokens that skip_special_tokens keeps (see addTokens)

	plain, normed *matcher            // added-token matchers: non-normalized, normalized
	strip         map[int32]addedOpts // added tokens with lstrip, rstrip or single_word

	prefix, suffix []int32 // TemplateProcessing around $A
	specials       Specials

	encoders sync.Pool
}

// Encode returns the ids of text. addBOS applies the post-processor template
// (HF add_special_tokens; for Llama 3 that prepends <|begin_of_text|> and
// never appends an EOS; Qwen's adds nothing). parseSpecial makes
// special-token strings in text map to their ids; see the package doc.
func (t *Tokenizer) Encode(text string, addBOS, parseSpecial bool) []int32 {
	return t.EncodeSegments([]Segment{{Text: text, Special: parseSpecial}}, addBOS)
}

// EncodeSegments encodes each segment on its own and concatenates the ids,
// an added token's rstrip or lstrip taking the whitespace of the segments
// beside it as in the joined text; see the package doc for when this equals
// encoding the joined text.
func (t *Tokenizer) EncodeSegments(segs []Segment, addBOS bool) []int32 {
	n := 0
	for _, s := range segs {
		n += len(s.Text)
	}
	out := make([]int32, 0, n/3+len(t.prefix)+len(t.suffix)+1)
	if addBOS {
		out = append(out, t.prefix...)
	}
	texts, bases := t.stripAcross(segs)
	e := t.encoder()
	for i, s := range segs {
		out = e.encodeText(texts[i], bases[i], s.Special, out)
	}
	t.encoders.Put(e)
	if addBOS {
		out = append(out, t.suffix...)
	}
	return out
}

// stripAcross returns the segments' texts and their offsets in the joined
// text with the whitespace that an added token's rstrip or lstrip takes
// from the segments after or before it removed, as encoding the joined text
// would take it (the "\n" after Phi-3's "<|user|>" in a chat prompt).
func (t *Tokenizer) stripAcross(segs []Segment) (texts []string, bases []int) {
	texts, bases = make([]string, len(segs)), make([]int, len(segs))
	base := 0
	for i, s := range segs {
		texts[i], bases[i] = s.Text, base
		base += len(s.Text)
	}
	if len(t.strip) == 0 || len(segs) < 2 {
		return texts, bases
	}
	eat := false // an rstrip reaches the end of the segments so far
	for i, s := range segs {
		if eat {
			rest := strings.TrimLeftFunc(texts[i], unicode.IsSpace)
			bases[i] += len(texts[i]) - len(rest)
			texts[i] = rest
		}
		_, rstrip := t.stripEdges(texts[i], s.Special)
		eat = rstrip || (eat && texts[i] == "")
	}
	eat = false // an lstrip reaches the start of the segments after
	for i := len(segs) - 1; i >= 0; i-- {
		if eat {
			texts[i] = strings.TrimRightFunc(texts[i], unicode.IsSpace)
		}
		lstrip, _ := t.stripEdges(texts[i], segs[i].Special)
		eat = lstrip || (eat && texts[i] == "")
	}
	return texts, bases
}

// stripEdges reports whether s starts with an added token whose lstrip
// reaches its start and ends with one whose rstrip reaches its end. Only
// tokens matched before normalization (normalized: false, as the families'
// control tokens are) are looked at.
func (t *Tokenizer) stripEdges(s string, parseSpecial bool) (lstrip, rstrip bool) {
	if t.plain == nil {
		return false, false
	}
	text := 0
	for from := 0; ; {
		start, end, id, ok := t.plain.find(s, from)
		if !ok {
			return lstrip, rstrip
		}
		from = end
		if start, end, ok = t.accept(s, text, start, end, id, parseSpecial); !ok {
			continue
		}
		o := t.strip[id]
		lstrip = lstrip || (start == 0 && o.lstrip)
		rstrip = end == len(s) && o.rstrip
		text = end
	}
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

// StartPiece returns the bytes Decode emits for id as the first token of a
// text: for a SentencePiece-style tokenizer without the leading space its
// decoder strips (Strip, Metaspace), so a reply that starts after a control
// token reads as HF's decode of the reply's ids; else Piece. A <0xXX> token
// stays its byte.
func (t *Tokenizer) StartPiece(id int32) []byte {
	if !t.valid(id) {
		return nil
	}
	if t.byteLevel || t.special[id] {
		return t.piece(id)
	}
	if _, ok := byteToken(t.decodeString(id)); ok {
		return t.piece(id)
	}
	return []byte(t.decodeTokens([]int32{id}, false))
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
	if !t.byteLevel {
		return t.decodeTokens(ids, skipSpecial)
	}
	var b []byte
	for _, id := range ids {
		if t.valid(id) && !(skipSpecial && t.skipped(id)) {
			b = append(b, t.piece(id)...)
		}
	}
	return lossyString(b)
}

// skipped reports whether decoding with skip_special_tokens drops id.
func (t *Tokenizer) skipped(id int32) bool { return t.special[id] && !t.unskipped[id] }

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
	maxCachedWord = 1 << 12 // bytes
)

const noMerge = ^uint64(0)

func (t *Tokenizer) encoder() *encoder {
	if e, ok := t.encoders.Get().(*encoder); ok {
		return e
	}
	return &encoder{t: t, cache: make(map[string]uint64)}
}

// encodeText splits s (at byte base of the whole input) at the
// non-normalized added tokens, and encodes the text between them with
// encodeNormalized. As in HF, a special token found while parseSpecial is
// off stays ordinary text, and the search resumes after it (so it also hides
// overlapping added tokens).
func (e *encoder) encodeText(s string, base int, parseSpecial bool, out []int32) []int32 {
	if e.t.plain == nil {
		return e.encodeNormalized(s, base, parseSpecial, out)
	}
	text := 0 // start of the text not yet encoded
	for from := 0; ; {
		start, end, id, ok := e.t.plain.find(s, from)
		if !ok {
			return e.encodeNormalized(s[text:], base+text, parseSpecial, out)
		}
		from = end
		if start, end, ok = e.t.accept(s, text, start, end, id, parseSpecial); !ok {
			continue
		}
		out = e.encodeNormalized(s[text:start], base+text, parseSpecial, out)
		out = append(out, id)
		text = end
	}
}

// encodeNormalized normalizes s, splits it at the normalized added tokens
// and pre-tokenizes and encodes the text between them.
func (e *encoder) encodeNormalized(s string, base int, parseSpecial bool, out []int32) []int32 {
	t := e.t
	if s == "" {
		return out
	}
	if t.norm != nil {
		s = t.normalize(s)
	}
	if t.normed == nil {
		return e.pretokenize(s, base == 0, out)
	}
	text := 0
	for from := 0; ; {
		start, end, id, ok := t.normed.find(s, from)
		if !ok {
			return e.pretokenize(s[text:], base == 0 && text == 0, out)
		}
		from = end
		if start, end, ok = t.accept(s, text, start, end, id, parseSpecial); !ok {
			continue
		}
		out = e.pretokenize(s[text:start], base == 0 && text == 0, out)
		out = append(out, id)
		text = end
	}
}

// accept applies HF's rules to an added-token match s[start:end] found
// after the text already taken (up to text): a special token is text when
// parseSpecial is off, single_word needs no word character on either side,
// and lstrip and rstrip widen the match over the whitespace beside it.
func (t *Tokenizer) accept(s string, text, start, end int, id int32, parseSpecial bool) (int, int, bool) {
	if !parseSpecial && t.special[id] {
		return 0, 0, false
	}
	o, ok := t.strip[id]
	if !ok {
		return start, end, true
	}
	if o.singleWord && (endsWithWord(s[:start]) || startsWithWord(s[end:])) {
		return 0, 0, false
	}
	if o.lstrip {
		start = len(strings.TrimRightFunc(s[:start], unicode.IsSpace))
	}
	if o.rstrip {
		end = len(s) - len(strings.TrimLeftFunc(s[end:], unicode.IsSpace))
	}
	if end <= text { // only after an rstrip overlapping this match
		return 0, 0, false
	}
	return max(start, text), end, true
}

// addedOpts are an added token's lstrip, rstrip and single_word.
type addedOpts struct{ lstrip, rstrip, singleWord bool }

// wordRune is Rust regex's Unicode \w, which single_word tests.
func wordRune(r rune) bool {
	return unicode.In(r, unicode.L, unicode.M, unicode.Nd, unicode.Nl, unicode.Pc, unicode.Other_Alphabetic, unicode.Join_Control)
}

func endsWithWord(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && wordRune(r)
}

func startsWithWord(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n > 0 && wordRune(r)
}

// word appends the BPE ids of one byte-level pre-token.
func (e *encoder) word(w string, out []int32) []int32 {
	t := e.t
	if len(w) == 1 {
		return append(out, t.byteID[w[0]])
	}
	if out, ok := e.known(w, out); ok {
		return out
	}
	sym := e.sym[:0]
	for i := 0; i < len(w); i++ {
		sym = append(sym, t.byteID[w[i]])
	}
	return e.remember(w, e.merge(sym), out)
}

// known appends the ids of word w when they need no merging: its own vocab
// entry under ignore_merges, or the ids cached by remember.
func (e *encoder) known(w string, out []int32) ([]int32, bool) {
	if e.t.ignoreMerges {
		if id, ok := e.t.vocab[w]; ok {
			return append(out, id), true
		}
	}
	if v, ok := e.cache[w]; ok {
		return append(out, e.arena[v>>32:v>>32+v&0xffffffff]...), true
	}
	return out, false
}

// remember caches the ids of word w and appends them to out.
func (e *encoder) remember(w string, ids, out []int32) []int32 {
	if len(w) > maxCachedWord {
		return append(out, ids...)
	}
	if len(e.cache) >= maxCacheWords || len(e.arena)+len(ids) > maxArena {
		clear(e.cache)
		e.arena = e.arena[:0]
	}
	e.cache[strings.Clone(w)] = uint64(len(e.arena))<<32 | uint64(len(ids))
	e.arena = append(e.arena, ids...)
	return append(out, ids...)
}
