//go:build !nomkmodel

package main

import (
	"fmt"
	"io"
	"time"
)

// progressWriter counts what goes through it to a file of a known size and
// prints, at most every progressEvery, a `\r`-updated line on out with the
// megabytes written; Done ends the line.
type progressWriter struct {
	w       io.Writer
	out     io.Writer
	name    string
	total   int64
	n       int64
	last    time.Time
	printed bool
}

const progressEvery = time.Second

func newProgressWriter(w, out io.Writer, name string, total int64) *progressWriter {
	return &progressWriter{w: w, out: out, name: name, total: total, last: time.Now()}
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.n += int64(n)
	if time.Since(p.last) >= progressEvery {
		p.last = time.Now()
		p.print()
	}
	return n, err
}

func (p *progressWriter) print() {
	fmt.Fprintf(p.out, "\rhexserve mkmodel: %s: %8.1f of %.1f MB written (%3.0f%%)", p.name, float64(p.n)/1e6, float64(p.total)/1e6,
		min(100, 100*float64(p.n)/float64(max(p.total, 1))))
	p.printed = true
}

// Note prints a whole line (a finished shard) without breaking the
// progress line.
func (p *progressWriter) Note(format string, args ...any) {
	if p.printed {
		fmt.Fprintln(p.out)
	}
	fmt.Fprintf(p.out, "hexserve mkmodel: "+format+"\n", args...)
	p.printed = false
}

// Done ends the progress line, if one was printed.
func (p *progressWriter) Done() {
	if p.printed {
		p.print()
		fmt.Fprintln(p.out)
	}
}
