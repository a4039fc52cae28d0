package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hexserve/hexserve/internal/modelfile"
)

type fileJSON struct {
	Truncation    json.RawMessage `json:"truncation"`
	Padding       json.RawMessage `json:"padding"`
	AddedTokens   []addedJSON     `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         *modelJSON      `json:"model"`
}

type addedJSON struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelJSON struct {
	Type                    string     `json:"type"`
	Dropout                 *float64   `json:"dropout"`
	ContinuingSubwordPrefix *string    `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string    `json:"end_of_word_suffix"`
	ByteFallback            bool       `json:"byte_fallback"`
	UnkToken                *string    `json:"unk_token"`
	FuseUnk                 bool       `json:"fuse_unk"`
	IgnoreMerges            bool       `json:"ignore_merges"`
	Vocab                   vocabJSON  `json:"vocab"`
	Merges                  mergesJSON `json:"merges"`
}

type componentJSON struct {
	Type string `json:"type"`
	// Sequence
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Processors    []json.RawMessage `json:"processors"`
	Normalizers   []json.RawMessage `json:"normalizers"`
	Decoders      []json.RawMessage `json:"decoders"`
	// Split, Replace
	Pattern  map[string]string `json:"pattern"`
	Behavior string            `json:"behavior"`
	Invert   bool              `json:"invert"`
	Content  *string           `json:"content"` // Replace, Strip
	// ByteLevel; Metaspace (add_prefix_space false means never)
	AddPrefixSpace *bool `json:"add_prefix_space"`
	UseRegex       *bool `json:"use_regex"` // default true
	// Metaspace
	Replacement   string `json:"replacement"`
	PrependScheme string `json:"prepend_scheme"`
	Split         *bool  `json:"split"`
	// Prepend
	Prepend string `json:"prepend"`
	// Strip
	Start int `json:"start"`
	Stop  int `json:"stop"`
	// TemplateProcessing
	Single        []map[string]templateItem `json:"single"`
	SpecialTokens map[string]struct {
		IDs []int32 `json:"ids"`
	} `json:"special_tokens"`
}

type templateItem struct {
	ID string `json:"id"`
}

// Load reads a Hugging Face tokenizer.json file, a regular file of at most
// modelfile.MaxTokenizer bytes; see Parse.
func Load(path string) (*Tokenizer, error) {
	data, err := modelfile.ReadFile(path, modelfile.MaxTokenizer)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return t, nil
}

// Parse builds a Tokenizer from the contents of a Hugging Face
// tokenizer.json of one of the forms the package doc lists. Any other
// component or option is an error naming it.
func Parse(data []byte) (*Tokenizer, error) {
	t, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return t, nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

func parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("decoding tokenizer.json: %w", err)
	}
	if !isNull(f.Truncation) {
		return nil, fmt.Errorf("truncation is not supported (must be null)")
	}
	if !isNull(f.Padding) {
		return nil, fmt.Errorf("padding is not supported (must be null)")
	}
	nm, err := parseNormalizer(f.Normalizer)
	if err != nil {
		return nil, err
	}
	pre, byteLevel, err := parsePreTokenizer(f.PreTokenizer)
	if err != nil {
		return nil, err
	}
	dec, err := parseDecoder(f.Decoder, byteLevel)
	if err != nil {
		return nil, err
	}
	if f.Model == nil {
		return nil, fmt.Errorf("missing model")
	}
	t, err := buildModel(f.Model, byteLevel, dec)
	if err != nil {
		return nil, err
	}
	t.norm, t.pre = nm, pre
	if err := t.addTokens(f.AddedTokens); err != nil {
		return nil, err
	}
	if err := t.setPostProcessor(f.PostProcessor); err != nil {
		return nil, err
	}
	t.packPieces()
	bos := t.idOr("<|begin_of_text|>")
	if len(t.prefix) > 0 {
		bos = t.prefix[0]
	}
	t.specials = Specials{
		BOS:       bos,
		EOT:       t.idOr("<|eot_id|>"),
		EOM:       t.idOr("<|eom_id|>"),
		PythonTag: t.idOr("<|python_tag|>"),
		EndOfText: t.idOr("<|end_of_text|>"),
	}
	return t, nil
}

// packPieces moves the decoded token bytes into one blob.
func (t *Tokenizer) packPieces() {
	n := 0
	for _, p := range t.pieces {
		n += len(p)
	}
	t.blob = make([]byte, 0, n)
	t.off = make([]uint32, 0, len(t.pieces)+1)
	for _, p := range t.pieces {
		t.off = append(t.off, uint32(len(t.blob)))
		t.blob = append(t.blob, p...)
		t.longest = max(t.longest, len(p))
	}
	t.off = append(t.off, uint32(len(t.blob)))
	t.pieces = nil
}

func (t *Tokenizer) idOr(s string) int32 {
	if id, ok := t.TokenID(s); ok {
		return id
	}
	return -1
}

// component decodes one of tokenizer.json's components (what names it in
// the error).
func component(raw json.RawMessage, what string) (componentJSON, error) {
	var c componentJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("decoding %s: %w", what, err)
	}
	return c, nil
}

// required is component for one that must be there: null is refused
// (need says what is supported).
func required(raw json.RawMessage, what, need string) (componentJSON, error) {
	if isNull(raw) {
		return componentJSON{}, fmt.Errorf("unsupported %s null (need %s)", what, need)
	}
	return component(raw, what)
}

// maxTokenID bounds the ids a file may use, so that a hostile one cannot
// make the loader allocate gigabytes of id tables.
const maxTokenID = 1 << 22

func buildModel(m *modelJSON, byteLevel bool, dec []decodeStep) (*Tokenizer, error) {
	switch {
	case m.Type != "BPE" && m.Type != "":
		return nil, notSupported("model", m.Type)
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, fmt.Errorf("model BPE: dropout=%v is not supported", *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, fmt.Errorf("model BPE: continuing_subword_prefix=%q is not supported", *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, fmt.Errorf("model BPE: end_of_word_suffix=%q is not supported", *m.EndOfWordSuffix)
	case len(m.Vocab.ids) == 0:
		return nil, fmt.Errorf("model BPE has an empty vocab")
	}
	t := &Tokenizer{
		vocab:        make(map[string]int32, len(m.Vocab.ids)),
		ignoreMerges: m.IgnoreMerges,
		byteLevel:    byteLevel,
		decoders:     dec,
		unk:          -1,
		fuseUnk:      m.FuseUnk,
		added:        make(map[string]int32),
	}
	maxID := int32(-1)
	for i, id := range m.Vocab.ids {
		tok := m.Vocab.tokens[i]
		if id < 0 || id >= maxTokenID {
			return nil, fmt.Errorf("BPE vocab token %q has id %d, outside [0, %d)", tok, id, maxTokenID)
		}
		maxID = max(maxID, id)
	}
	t.tokens = make([]string, maxID+1)
	t.pieces = make([]string, maxID+1)
	t.present = make([]bool, maxID+1)
	t.special = make([]bool, maxID+1)
	byString := make(map[string]int32, len(m.Vocab.ids))
	for i, id := range m.Vocab.ids {
		tok := m.Vocab.tokens[i]
		byString[tok] = id
		if t.present[id] {
			return nil, fmt.Errorf("BPE vocab id %d is used twice", id)
		}
		t.present[id] = true
		t.tokens[id] = tok
		if byteLevel {
			t.addByteLevel(tok, id)
		} else {
			t.vocab[tok] = id
			t.pieces[id] = t.spPiece(tok)
		}
	}
	if err := t.modelBytes(m); err != nil {
		return nil, err
	}
	if err := t.buildMerges(m.Merges, byString); err != nil {
		return nil, err
	}
	return t, nil
}

// addByteLevel adds a byte-level vocab token.
func (t *Tokenizer) addByteLevel(tok string, id int32) {
	b, ok := appendByteLevelDecoded(nil, tok)
	t.pieces[id] = string(b)
	if ok {
		t.vocab[string(b)] = id
		return
	}
	// Unreachable by encoding (BPE only builds byte-level strings), but
	// TokenID must still find it.
	if t.other == nil {
		t.other = make(map[string]int32)
	}
	t.other[tok] = id
}

// modelBytes sets the byte symbols: all 256 for a byte-level model; the
// <0xXX> tokens for byte_fallback, and unk_token, otherwise.
func (t *Tokenizer) modelBytes(m *modelJSON) error {
	for b := range 256 {
		t.byteTok[b] = -1
		if t.byteLevel {
			id, ok := t.vocab[string([]byte{byte(b)})]
			if !ok {
				return fmt.Errorf("BPE vocab lacks the byte-level symbol for byte 0x%02x", b)
			}
			t.byteID[b] = id
		} else if id, ok := t.vocab[fmt.Sprintf("<0x%02X>", b)]; ok && m.ByteFallback {
			t.byteTok[b] = id
		}
	}
	if m.UnkToken != nil && !t.byteLevel {
		id, ok := t.vocab[*m.UnkToken]
		if !ok {
			return fmt.Errorf("model BPE: unk_token %q is not in the vocab", *m.UnkToken)
		}
		t.unk = id
	}
	return nil
}

func (t *Tokenizer) buildMerges(pairs [][2]string, byString map[string]int32) error {
	t.merges = make(map[uint64]uint64, len(pairs))
	var buf []byte
	for rank, p := range pairs {
		a, okA := byString[p[0]]
		b, okB := byString[p[1]]
		buf = append(append(buf[:0], p[0]...), p[1]...)
		c, okC := byString[string(buf)]
		if !okA || !okB || !okC {
			return fmt.Errorf("BPE merge %d (%q %q) uses a token missing from the vocab", rank, p[0], p[1])
		}
		t.merges[pairKey(a, b)] = uint64(rank)<<32 | uint64(uint32(c))
	}
	return nil
}

// cutSpace splits a merge string "a b" at its one space, as HF does (it
// rejects strings with any other number of spaces).
func cutSpace(s string) (a, b string, ok bool) {
	a, b, ok = strings.Cut(s, " ")
	return a, b, ok && !strings.Contains(b, " ")
}

// modelID looks up a byte-level token string in the BPE vocab, using buf as
// scratch space.
func (t *Tokenizer) modelID(tok string, buf []byte) (int32, bool, []byte) {
	if !t.byteLevel {
		id, ok := t.vocab[tok]
		return id, ok, buf
	}
	buf, ok := appendByteLevelDecoded(buf[:0], tok)
	if !ok {
		id, ok := t.other[tok]
		return id, ok, buf
	}
	id, ok := t.vocab[string(buf)]
	return id, ok, buf
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func (t *Tokenizer) addTokens(list []addedJSON) error {
	var plain, norm matchSet // non-normalized, normalized
	for _, a := range list {
		switch {
		case a.Content == "":
			return fmt.Errorf("added token %d has empty content", a.ID)
		case a.ID < 0 || a.ID >= maxTokenID:
			return fmt.Errorf("added token %q has id %d, outside [0, %d)", a.Content, a.ID, maxTokenID)
		}
		if int(a.ID) >= len(t.tokens) {
			n := int(a.ID) + 1
			t.tokens = append(t.tokens, make([]string, n-len(t.tokens))...)
			t.pieces = append(t.pieces, make([]string, n-len(t.pieces))...)
			t.present = append(t.present, make([]bool, n-len(t.present))...)
			t.special = append(t.special, make([]bool, n-len(t.special))...)
		}
		t.present[a.ID] = true
		t.tokens[a.ID] = a.Content
		t.special[a.ID] = a.Special
		t.added[a.Content] = a.ID
		if a.SingleWord || a.LStrip || a.RStrip {
			if t.strip == nil {
				t.strip = make(map[int32]addedOpts)
			}
			t.strip[a.ID] = addedOpts{lstrip: a.LStrip, rstrip: a.RStrip, singleWord: a.SingleWord}
		}
		// HF matches non-normalized tokens first, then normalized ones, in
		// their normalized form, in the normalized remaining text; the
		// decoder also gets that form.
		set, pattern := &plain, a.Content
		if a.Normalized {
			set = &norm
			if n := t.normalize(a.Content); n != a.Content && t.norm != nil {
				if t.addedAs == nil {
					t.addedAs = make(map[int32]string)
				}
				t.addedAs[a.ID], pattern = n, n
			}
		}
		if t.byteLevel {
			b, _ := appendByteLevelDecoded(nil, pattern)
			t.pieces[a.ID] = string(b)
		} else {
			t.pieces[a.ID] = t.spPiece(pattern)
		}
		set.add(pattern, a.ID)
	}
	t.plain, t.normed = plain.finish(), norm.finish()
	// HF's skip_special_tokens tests the string the decoder gets: a special
	// token whose normalized form is no special token's content stays.
	for id, s := range t.addedAs {
		if sid, ok := t.added[s]; t.special[id] && !(ok && t.special[sid]) {
			if t.unskipped == nil {
				t.unskipped = make(map[int32]bool)
			}
			t.unskipped[id] = true
		}
	}
	return nil
}

func (t *Tokenizer) setPostProcessor(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	c, err := component(raw, "post_processor")
	if err != nil {
		return err
	}
	steps := []componentJSON{c}
	if c.Type == "Sequence" {
		steps = steps[:0]
		for _, r := range c.Processors {
			s, err := component(r, "post_processor")
			if err != nil {
				return err
			}
			steps = append(steps, s)
		}
	}
	seenTemplate := false
	for _, s := range steps {
		switch s.Type {
		case "ByteLevel": // only adjusts offsets
		case "TemplateProcessing":
			if seenTemplate {
				return fmt.Errorf("unsupported post_processor: two TemplateProcessing steps")
			}
			seenTemplate = true
			if err := t.setTemplate(&s); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unsupported post_processor %q (need TemplateProcessing and/or ByteLevel)", s.Type)
		}
	}
	return nil
}

func (t *Tokenizer) setTemplate(c *componentJSON) error {
	seq := false
	for _, item := range c.Single {
		if it, ok := item["Sequence"]; ok {
			if it.ID != "A" || seq {
				return fmt.Errorf("unsupported TemplateProcessing single template (sequence %q)", it.ID)
			}
			seq = true
			continue
		}
		it, ok := item["SpecialToken"]
		if !ok {
			return fmt.Errorf("unsupported TemplateProcessing single template item %v", item)
		}
		st, ok := c.SpecialTokens[it.ID]
		if !ok {
			return fmt.Errorf("TemplateProcessing special token %q is not defined in special_tokens", it.ID)
		}
		for _, id := range st.IDs {
			if _, ok := t.TokenString(id); !ok {
				return fmt.Errorf("TemplateProcessing special token %q has unknown id %d", it.ID, id)
			}
		}
		if seq {
			t.suffix = append(t.suffix, st.IDs...)
		} else {
			t.prefix = append(t.prefix, st.IDs...)
		}
	}
	if !seq {
		return fmt.Errorf("unsupported TemplateProcessing single template without $A")
	}
	return nil
}

// matchSet collects added-token strings for leftmost-longest matching.
type matchSet struct {
	ids map[string]int32
}

func (s *matchSet) add(content string, id int32) {
	if s.ids == nil {
		s.ids = make(map[string]int32)
	}
	s.ids[content] = id
}

// finish returns the matcher, nil for no tokens.
func (s *matchSet) finish() *matcher {
	if len(s.ids) == 0 {
		return nil
	}
	m := &matcher{ids: s.ids}
	for k := range s.ids {
		m.first[k[0]] = true
		if !slices.Contains(m.lens, len(k)) {
			m.lens = append(m.lens, len(k))
		}
	}
	slices.Sort(m.lens)
	slices.Reverse(m.lens)
	return m
}

// matcher finds added tokens in text, leftmost-longest like HF's
// Aho-Corasick matcher.
type matcher struct {
	ids   map[string]int32
	first [256]bool
	lens  []int // descending
}

// find returns the leftmost-longest match in s at or after from.
func (m *matcher) find(s string, from int) (start, end int, id int32, ok bool) {
	for i := from; i < len(s); i++ {
		if !m.first[s[i]] {
			continue
		}
		for _, n := range m.lens {
			if i+n <= len(s) {
				if id, ok := m.ids[s[i:i+n]]; ok {
					return i, i + n, id, true
				}
			}
		}
	}
	return 0, 0, 0, false
}
