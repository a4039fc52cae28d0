package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version", stdout, stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: hexserve version\n\nPrints the hexserve version, the Go version and the platform.")
	}
	if code, ok := parseNoArgs(fs, args, stderr); !ok {
		return code
	}
	fmt.Fprintf(stdout, "hexserve %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}

// parseFlags parses args with fs, flags before and after positional
// arguments alike ("inspect BUNDLE --json"), and returns the positional
// arguments in order. Everything after "--" is positional.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	if u, ok := fs.Output().(*usageOut); ok {
		u.help = wantsHelp(args)
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if i := len(args) - len(rest); i > 0 && args[i-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// parseNoArgs parses args with fs for a command that takes no positional
// arguments. ok is false when the command must stop with code: a flag
// error or --help (exitCode), or an unexpected argument (2).
func parseNoArgs(fs *flag.FlagSet, args []string, stderr io.Writer) (code int, ok bool) {
	rest, err := parseFlags(fs, args)
	if err != nil {
		return exitCode(err), false
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "hexserve %s: unexpected argument %q\n", fs.Name(), rest[0])
		return 2, false
	}
	return 0, true
}

// exitCode is 0 for --help and 2 for other flag errors.
func exitCode(err error) int {
	if err == flag.ErrHelp {
		return 0
	}
	return 2
}
