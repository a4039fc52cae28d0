package main

import (
	"flag"
	"fmt"
	"io"
)

// newFlags is a flag set whose usage text goes to stdout when the
// arguments ask for it (--help, -h: exit 0) and to stderr when it follows a
// usage error (exit 2). A command's Usage writes to fs.Output().
func newFlags(name string, stdout, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(&usageOut{stdout: stdout, stderr: stderr})
	return fs
}

// usageOut sends a flag set's output to stdout while help was asked for,
// else to stderr.
type usageOut struct {
	stdout, stderr io.Writer
	help           bool
}

func (u *usageOut) Write(p []byte) (int, error) {
	if u.help {
		return u.stdout.Write(p)
	}
	return u.stderr.Write(p)
}

// wantsHelp reports whether args ask for help before any "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelp(a) {
			return true
		}
	}
	return false
}

// humanSize formats n bytes for people in the units config sizes take:
// "512 B", "40.5 MiB", "3.36 GiB".
func humanSize(n int64) string {
	switch f := float64(n); {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", f/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", f/(1<<20))
	default:
		return fmt.Sprintf("%.2f GiB", f/(1<<30))
	}
}
