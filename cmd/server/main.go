// Command hexserve is an OpenAI-compatible HTTP server that runs Llama-3.2 on
// a Qualcomm Hexagon NPU through QNN context binaries (or on the host through
// hostsim, a CPU stand-in with the same C ABI).
//
// Usage:
//
//	hexserve [serve] [--config FILE] [--addr HOST:PORT] [--bundle PATH] [--queue N]
//	hexserve version | --version | -v
//	hexserve help [command]
//	hexserve inspect [flags] PATH
//	hexserve mkmodel [flags]
//	hexserve bench [flags]
//
// Each subcommand has --help (on stdout, exit 0); a usage error exits 2.
// Flags may come before or after positional arguments.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// command is a subcommand's entry point; it returns the exit code: 0, 1
// when the work failed, 2 for a usage error. Its --help goes to stdout.
type command func(args []string, stdout, stderr io.Writer) int

// subcommands maps names to their entry points.
var subcommands = map[string]command{
	"serve":   serveMain,
	"version": runVersion,
	"inspect": inspect,
	"mkmodel": mkmodel,
	"bench":   benchMain,
}

func run(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) > 0 && (args[0] == "--version" || args[0] == "-v" || args[0] == "-version"):
		return runVersion(args[1:], stdout, stderr)
	case len(args) == 0 || strings.HasPrefix(args[0], "-") && !isHelp(args[0]):
		return serveMain(args, stdout, stderr) // `hexserve --config x` means serve
	case isHelp(args[0]):
		usage(stdout)
		return 0
	case args[0] == "help":
		return help(args[1:], stdout, stderr)
	}
	cmd, ok := subcommands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "hexserve: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return cmd(args[1:], stdout, stderr)
}

// help implements `hexserve help [command]`.
func help(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		usage(stdout)
		return 0
	case len(args) > 1:
		fmt.Fprintf(stderr, "hexserve help: unexpected argument %q (one command only)\n", args[1])
		return 2
	}
	cmd, ok := subcommands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "hexserve help: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return cmd([]string{"--help"}, stdout, stderr)
}

func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

func usage(w io.Writer) {
	fmt.Fprint(w, `hexserve: an OpenAI-compatible server for Llama-3.2 on the Hexagon NPU

Usage:
  hexserve [serve] [flags]   serve the API (the default command)
  hexserve version           print the version (also --version, -v)
  hexserve inspect PATH      print the graphs and tensors of a bundle, context binary or .pte
  hexserve mkmodel [flags]   write a test model with generated weights for hostsim
  hexserve bench [flags]     run the performance workload on a bundle: throughput,
                             host time per token, streaming efficiency, prefix-cache
                             gain, memory
  hexserve help [command]    print this, or a command's flags

Run "hexserve help <command>" (or "hexserve <command> --help") for a command's flags.
Exit codes: 0 done, 1 the work failed, 2 a usage error.
`)
}
