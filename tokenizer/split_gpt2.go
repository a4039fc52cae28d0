package tokenizer

// GPT2Pattern is the regex of the ByteLevel pre-tokenizer with use_regex
// (GPT-2's); splitGPT2 implements it by hand with Oniguruma's semantics.
const GPT2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// splitGPT2 returns the end of the GPT-2 pre-token starting at s[i]
// (i < len(s)).
func splitGPT2(s string, i int) int {
	// 's|'t|'re|'ve|'m|'ll|'d (case-sensitive)
	if s[i] == '\'' && i+1 < len(s) {
		switch s[i+1] {
		case 's', 't', 'm', 'd':
			return i + 2
		case 'r', 'v':
			if i+2 < len(s) && s[i+2] == 'e' {
				return i + 3
			}
		case 'l':
			if i+2 < len(s) && s[i+2] == 'l' {
				return i + 3
			}
		}
	}
	c, w := classAt(s, i)
	if c == clCRLF {
		c = clSpace
	}
	//  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+
	if c != clSpace {
		return run(s, i+w, c)
	}
	if s[i] == ' ' && i+1 < len(s) {
		if c2, w2 := classAt(s, i+1); c2 != clSpace && c2 != clCRLF {
			return run(s, i+1+w2, c2)
		}
	}
	// \s+(?!\S) gives back the run's last rune when a non-space follows;
	// \s+ takes a run of one.
	j, last := i, i
	for j < len(s) {
		c2, w2 := classAt(s, j)
		if c2 != clSpace && c2 != clCRLF {
			break
		}
		last = j
		j += w2
	}
	if j == len(s) || last == i {
		return j
	}
	return last
}
