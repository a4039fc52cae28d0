//go:build nomkmodel

package main

import "testing"

// mkmodelBuilt says whether this build has the mkmodel subcommand.
const mkmodelBuilt = false

// runMk skips tests that need a generated model in a build without mkmodel.
func runMk(t *testing.T, args ...string) (int, string, string) {
	t.Skip("built with -tags nomkmodel: no mkmodel")
	return 0, "", ""
}

// tinyBundle skips tests that need the generated tiny bundle in a build without mkmodel.
func tinyBundle(t *testing.T) (string, string) {
	t.Skip("built with -tags nomkmodel: no mkmodel")
	return "", ""
}
