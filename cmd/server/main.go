// Command hexserve is an OpenAI-compatible HTTP server that runs Llama-3.2 on
// a Qualcomm Hexagon NPU through QNN context binaries (or on the host through
// hostsim, a CPU stand-in with the same C ABI).
//
// Usage:
//
//	hexserve [serve] [--config FILE] [--addr HOST:PORT] [--bundle PATH] [--queue N]
//	hexserve version
//	hexserve inspect [flags] PATH
//	hexserve mkmodel [flags]
//	hexserve bench [flags]
//
// Each subcommand has --help. Flags may come before or after positional
// arguments.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// subcommands maps names to their entry points; each returns an exit code.
var subcommands = map[string]func(args []string) int{
	"serve":   runServe,
	"version": func(args []string) int { return runVersion(args, os.Stdout, os.Stderr) },
	"inspect": runInspect,
	"mkmodel": runMkmodel,
	"bench":   runBench,
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && !isHelp(args[0]) {
		return runServe(args) // `hexserve --config x` means serve
	}
	if isHelp(args[0]) || args[0] == "help" {
		usage(stdout)
		return 0
	}
	cmd, ok := subcommands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "hexserve: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return cmd(args[1:])
}

func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

func usage(w io.Writer) {
	fmt.Fprint(w, `hexserve: an OpenAI-compatible server for Llama-3.2 on the Hexagon NPU

Usage:
  hexserve [serve] [flags]   serve the API (the default command)
  hexserve version           print the version
  hexserve inspect PATH      print the graphs and tensors of a bundle, context binary or .pte
  hexserve mkmodel [flags]   write a test bundle for hostsim
  hexserve bench [flags]     run the performance workload on a bundle: throughput,
                             host time per token, streaming efficiency, prefix-cache
                             gain, memory

Run "hexserve <command> --help" for a command's flags.
`)
}
