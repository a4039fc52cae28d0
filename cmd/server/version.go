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
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: hexserve version\n\nPrints the hexserve version, the Go version and the platform.")
	}
	if err := fs.Parse(args); err != nil {
		return exitCode(err)
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	fmt.Fprintf(stdout, "hexserve %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}

// exitCode is 0 for --help and 2 for other flag errors.
func exitCode(err error) int {
	if err == flag.ErrHelp {
		return 0
	}
	return 2
}
