package tokenizer

// byteToRune is GPT-2's bytes_to_unicode table used by the ByteLevel
// pre-tokenizer and decoder: printable bytes map to themselves, the others to
// U+0100 and up, in byte order.
var byteToRune [256]rune

// runeByte inverts byteToRune; entries are -1 for runes outside the alphabet.
// Every alphabet rune is below U+0144.
var runeByte = func() (t [0x144]int16) {
	for i := range t {
		t[i] = -1
	}
	n := 0
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = rune(256 + n)
			n++
		}
		t[byteToRune[b]] = int16(b)
	}
	return t
}()

// runeToByte reports the byte a byte-level alphabet rune stands for.
func runeToByte(r rune) (byte, bool) {
	if r < 0 || int(r) >= len(runeByte) || runeByte[r] < 0 {
		return 0, false
	}
	return byte(runeByte[r]), true
}

// appendByteLevelDecoded appends the bytes a byte-level token string stands
// for. ok is false when s holds a rune outside the alphabet; HF's ByteLevel
// decoder then emits the token's UTF-8 bytes unchanged, and so does this.
func appendByteLevelDecoded(dst []byte, s string) (out []byte, ok bool) {
	n := len(dst)
	for _, r := range s {
		c, in := runeToByte(r)
		if !in {
			return append(dst[:n], s...), false
		}
		dst = append(dst, c)
	}
	return dst, true
}
