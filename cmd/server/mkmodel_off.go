//go:build nomkmodel

package main

import (
	"fmt"
	"io"
)

// mkWriter is a format's mkmodel writer, none in this build.
type mkWriter struct{}

// The formats' writers: none.
var mkBundle, mkPTE, mkGenie *mkWriter

// mkmodel stands in for the test-model writers in a build without them
// (-tags nomkmodel, as `make android` builds): a phone serves models, it
// does not generate hostsim ones.
func mkmodel(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "hexserve mkmodel: not in this build (built with -tags nomkmodel); use a host build")
	return 2
}
