package grammar

// Formats the grammar asserts, as ajv-formats' full mode and RFC 3339
// define them (a subset where noted in docs/api.md: no leap seconds, the
// time offset "Z" or ±hh:mm). Each is a prefix check over the string's
// ASCII content: ok reports that s can still be completed, done that s is
// a complete value.
var formats = map[string]func(s string) (ok, done bool){
	"date":      datePrefix,
	"time":      timePrefix,
	"date-time": dateTimePrefix,
	"uuid":      uuidPrefix,
	"ipv4":      ipv4Prefix,
}

func digit(c byte) bool { return c >= '0' && c <= '9' }

func num2(s string) int { return int(s[0]-'0')*10 + int(s[1]-'0') }

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// datePrefix: YYYY-MM-DD with a real day of the month.
func datePrefix(s string) (bool, bool) {
	if len(s) > 10 {
		return false, false
	}
	for i := range len(s) {
		if (i == 4 || i == 7) != (s[i] == '-') || i != 4 && i != 7 && !digit(s[i]) {
			return false, false
		}
	}
	if len(s) >= 6 && s[5] > '1' {
		return false, false
	}
	month := 0
	if len(s) >= 7 {
		if month = num2(s[5:7]); month < 1 || month > 12 {
			return false, false
		}
	}
	if len(s) >= 9 {
		year := int(s[0]-'0')*1000 + int(s[1]-'0')*100 + num2(s[2:4])
		dim := daysIn(year, month)
		if int(s[8]-'0')*10 > dim {
			return false, false
		}
		if len(s) == 10 {
			d := num2(s[8:10])
			return d >= 1 && d <= dim, d >= 1 && d <= dim
		}
	}
	return true, false
}

// hhmm checks a prefix of hh:mm (hours to maxH); it returns the length
// consumed (at most 5) and whether the prefix is valid.
func hhmm(s string, maxH int) (int, bool) {
	n := min(len(s), 5)
	for i := range n {
		c := s[i]
		switch i {
		case 2:
			if c != ':' {
				return n, false
			}
		case 0:
			if !digit(c) || int(c-'0') > maxH/10 {
				return n, false
			}
		case 1:
			if !digit(c) || num2(s[:2]) > maxH {
				return n, false
			}
		case 3:
			if c < '0' || c > '5' {
				return n, false
			}
		case 4:
			if !digit(c) {
				return n, false
			}
		}
	}
	return n, true
}

// timePrefix: hh:mm:ss[.frac](Z|±hh:mm).
func timePrefix(s string) (bool, bool) {
	n, ok := hhmm(s, 23)
	if !ok || len(s) <= 5 {
		return ok, false
	}
	if s[5] != ':' || len(s) > 6 && (s[6] < '0' || s[6] > '5') || len(s) > 7 && !digit(s[7]) {
		return false, false
	}
	_ = n
	i := 8
	if len(s) <= i {
		return true, false
	}
	if s[i] == '.' {
		j := i + 1
		for j < len(s) && digit(s[j]) && j-i <= 9 {
			j++
		}
		if j-i-1 > 9 || j == len(s) {
			return j-i-1 <= 9, false
		}
		if j == i+1 { // a '.' needs a digit
			return false, false
		}
		i = j
	}
	switch s[i] {
	case 'Z':
		return len(s) == i+1, len(s) == i+1
	case '+', '-':
		rest := s[i+1:]
		m, ok := hhmm(rest, 23)
		if !ok || len(rest) > 5 {
			return false, false
		}
		return true, m == 5
	}
	return false, false
}

// dateTimePrefix: date "T" time.
func dateTimePrefix(s string) (bool, bool) {
	if len(s) <= 10 {
		ok, _ := datePrefix(s)
		return ok, false
	}
	if _, done := datePrefix(s[:10]); !done || s[10] != 'T' {
		return false, false
	}
	return timePrefix(s[11:])
}

// uuidPrefix: 8-4-4-4-12 hexadecimal digits.
func uuidPrefix(s string) (bool, bool) {
	if len(s) > 36 {
		return false, false
	}
	for i := range len(s) {
		dash := i == 8 || i == 13 || i == 18 || i == 23
		if dash != (s[i] == '-') || !dash && !isHex(s[i]) {
			return false, false
		}
	}
	return true, len(s) == 36
}

// ipv4Prefix: four decimal octets 0-255 without leading zeros.
func ipv4Prefix(s string) (bool, bool) {
	parts, cur := 0, ""
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			if !digit(s[i]) {
				return false, false
			}
			cur += s[i : i+1]
			if len(cur) > 3 || len(cur) > 1 && cur[0] == '0' || len(cur) == 3 && cur > "255" {
				return false, false
			}
			continue
		}
		parts++
		if i < len(s) && (cur == "" || parts == 4) {
			return false, false
		}
		if i == len(s) {
			return true, parts == 4 && cur != ""
		}
		cur = ""
	}
	return true, false
}
