package upstream

import (
	"bytes"
	"net/url"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// secrets are the upstream's key and every spelling of its address (the
// URL, host:port, host). They are found as written and as JSON may escape
// any of their characters ("\/" for "/", "\u0061" for "a"), in linear time
// and with memory bounded by the spans found.
type secrets struct {
	plain [][]byte
	next  [][]int // each secret's KMP failure function
	// quoted: a secret has a character JSON must escape (a quote, a
	// backslash, a control character), so it may be spelled with an
	// escape other than \u and \/.
	quoted bool
}

func newSecrets(key, baseURL string, base *url.URL) *secrets {
	s := new(secrets)
	for _, v := range []string{key, baseURL, base.String(), base.Host, base.Hostname()} {
		if v == "" || slices.ContainsFunc(s.plain, func(p []byte) bool { return string(p) == v }) {
			continue
		}
		s.plain = append(s.plain, []byte(v))
		s.next = append(s.next, failure(v))
		s.quoted = s.quoted || strings.ContainsFunc(v, func(r rune) bool { return r == '"' || r == '\\' || r < ' ' })
	}
	return s
}

// failure is the KMP failure function of p: f[i] is the length of the
// longest proper border of p[:i+1].
func failure(p string) []int {
	f := make([]int, len(p))
	for i, k := 1, 0; i < len(p); i++ {
		for k > 0 && p[i] != p[k] {
			k = f[k-1]
		}
		if p[i] == p[k] {
			k++
		}
		f[i] = k
	}
	return f
}

// span is a [start, end) byte range of a text.
type span struct{ start, end int }

// spans returns the byte ranges of b that spell a secret, in order, the
// overlapping ones merged (so a URL goes whole, its host with it).
func (s *secrets) spans(b []byte) []span {
	if len(s.plain) == 0 {
		return nil
	}
	var out []span
	escaped := bytes.Contains(b, []byte(`\u`)) || bytes.Contains(b, []byte(`\/`)) ||
		s.quoted && bytes.IndexByte(b, '\\') >= 0
	if !escaped {
		for _, p := range s.plain {
			for i := 0; ; {
				j := bytes.Index(b[i:], p)
				if j < 0 {
					break
				}
				out = append(out, span{i + j, i + j + len(p)})
				i += j + len(p)
			}
		}
	} else {
		out = s.escaped(b)
	}
	return merge(out)
}

// escaped finds the secrets in b read as JSON string content: each escape
// is one unit whose decoded bytes are matched, by a KMP automaton per
// secret. A match's start is found from a ring of the last units' starts,
// as long as the longest secret.
func (s *secrets) escaped(b []byte) []span {
	longest := 0
	for _, p := range s.plain {
		longest = max(longest, len(p))
	}
	var out []span
	state := make([]int, len(s.plain))
	ring := make([]int, longest) // ring[d%longest]: start in b of decoded byte d
	var enc [utf8.UTFMax]byte
	for i, d := 0, 0; i < len(b); {
		r, n := unescape(b[i:])
		unit := b[i : i+n]
		if r >= 0 {
			unit = enc[:utf8.EncodeRune(enc[:], r)]
		}
		for _, c := range unit {
			ring[d%longest] = i
			d++
			for k, p := range s.plain {
				m := state[k]
				for m > 0 && c != p[m] {
					m = s.next[k][m-1]
				}
				if c == p[m] {
					m++
				}
				if m == len(p) {
					out = append(out, span{ring[(d-m)%longest], i + n})
					m = 0 // as the plain search: no overlap within one secret
				}
				state[k] = m
			}
		}
		i += n
	}
	return out
}

// unescape reads the JSON escape at the start of b: its rune and length;
// r is -1 for a byte that starts no escape (n is 1).
func unescape(b []byte) (r rune, n int) {
	if len(b) < 2 || b[0] != '\\' {
		return -1, 1
	}
	switch b[1] {
	case '"', '\\', '/':
		return rune(b[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r, ok := hex4(b[2:])
		if !ok {
			return -1, 1
		}
		if utf16.IsSurrogate(r) && len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
			if lo, ok := hex4(b[8:]); ok {
				if pair := utf16.DecodeRune(r, lo); pair != utf8.RuneError {
					return pair, 12
				}
			}
		}
		return r, 6
	}
	return -1, 1
}

// hex4 is the value of four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// merge sorts spans and joins the overlapping ones.
func merge(sp []span) []span {
	if len(sp) < 2 {
		return sp
	}
	slices.SortFunc(sp, func(a, b span) int { return a.start - b.start })
	out := sp[:1]
	for _, x := range sp[1:] {
		if last := &out[len(out)-1]; x.start < last.end {
			last.end = max(last.end, x.end)
		} else {
			out = append(out, x)
		}
	}
	return out
}

// mask writes b with each span replaced by "[upstream]" to buf.
func mask(buf *bytes.Buffer, b []byte, sp []span) {
	at := 0
	for _, x := range sp {
		buf.Write(b[at:x.start])
		buf.WriteString("[upstream]")
		at = x.end
	}
	buf.Write(b[at:])
}
