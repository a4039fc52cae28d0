package grammar

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// reMatch runs d over s: complete match of the search semantics.
func reMatch(d *dfa, s string) bool {
	st := int32(1)
	for i := 0; i < len(s) && st != 0; i++ {
		st = d.step(st, s[i])
	}
	return d.accept[st]
}

func TestRegex(t *testing.T) {
	for _, c := range []struct {
		re      string
		yes, no []string
	}{
		{`^a*$`, []string{"", "aaa"}, []string{"b", "ab"}},
		{`a+`, []string{"a", "xay", "baa"}, []string{"", "b"}},
		{`^\d{2,3}$`, []string{"12", "123"}, []string{"1", "1234", "1a"}},
		{`^[^a-c]$`, []string{"d", "é", "😀"}, []string{"a", "b", "", "dd"}},
		{`^.$`, []string{"x", "é", "😀"}, []string{"\n", "\r", "\u2028", "ab"}},
		{`^\s\S\w\W\D$`, []string{"\u00a0x_-x", " 1a a"}, []string{"xxxxx"}},
		{`^(?:ab|cd)+?$|^x$`, []string{"ab", "abcd", "x"}, []string{"", "abc", "xx"}},
		{`^(?<n>a)b{0}c{1,}$`, []string{"ac", "acc"}, []string{"abc", "a"}},
		{`^[\d\-.]$`, []string{"-", ".", "5"}, []string{"a"}},
		{`^a{,2}$`, []string{"a{,2}"}, []string{"aa"}},
		{`^\u00e9\x41\/$`, []string{"éA/"}, []string{"eA/"}},
	} {
		d, err := compileRegex(c.re, false, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.re, err)
		}
		for _, s := range c.yes {
			if !reMatch(d, s) {
				t.Errorf("%s: %q not matched", c.re, s)
			}
		}
		for _, s := range c.no {
			if reMatch(d, s) {
				t.Errorf("%s: %q matched", c.re, s)
			}
		}
	}
}

func TestRegexRefused(t *testing.T) {
	for _, c := range []struct{ re, msg string }{
		{`(a)\1`, "backreferences"},
		{`a(?=b)`, "lookaround"},
		{`a(?<!b)`, "lookaround"},
		{`\bword`, "word boundaries"},
		{`a^b`, "^ and $"},
		{`(^a)`, "^ and $"},
		{`\p{L}`, "property"},
		{`a{2000}`, "above"},
		{`(`, "missing ')'"},
		{`[a`, "missing ']'"},
		{`*a`, "nothing to repeat"},
		{`\q`, "unknown escape"},
	} {
		_, err := compileRegex(c.re, false, nil)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: got %v, want an error about %q", c.re, err, c.msg)
		}
	}
}

func TestFormatDFAs(t *testing.T) {
	for name := range reFormats {
		d, err := formatDFA(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: %d states", name, d.states())
	}
}

// TestPatternMaskConcurrent: matchers of one grammar share its mask cache
// and its pattern's; masks in parallel agree with Allowed (run with -race).
func TestPatternMaskConcurrent(t *testing.T) {
	_, v := llama(t)
	g := mustCompile(t, `{"type":"object","properties":{"s":{"type":"string","pattern":"^[a-z]{1,6}$"}},"required":["s"]}`, true)
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for range 2 {
		wg.Go(func() {
			m := g.NewMatcher(v)
			mask := make([]uint64, (v.Size()+63)/64)
			for _, tok := range [][]byte{nil, []byte(`{"s":"`), []byte("ab")} { // nil: the document start, a cached structural state
				for _, b := range tok {
					m.ts = m.run(nil, m.ts, []byte{b})
				}
				m.Mask(mask)
				for id := range int32(v.Size()) {
					if m.Allowed(id) != (mask[id>>6]&(1<<(id&63)) != 0) {
						errs <- fmt.Sprintf("token %d: mask and Allowed disagree", id)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
