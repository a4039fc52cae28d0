package main

import (
	"fmt"
	"os"
)

// runBench is a placeholder until the bench engineer replaces this file.
func runBench(args []string) int {
	fmt.Fprintln(os.Stderr, "hexserve bench: not available yet")
	return 2
}
