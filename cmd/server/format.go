package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/bench"
	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/hexagon/qhexrt"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/tokenizer"
)

// format is one model format hexserve serves: how a path is recognised as it, and how it is
// probed, opened and inspected. A new format is one more row in formats.
type format struct {
	name string // the Ollama details' format, and the logs'
	// detect reports whether path (st its stat) holds this format and names its file or folder;
	// an error when it does but cannot be used as it is.
	detect func(path string, st os.FileInfo) (file string, ok bool, err error)
	probe  func(m config.Model, file string) (modelProbe, error)
	open   func(a openArgs) (opened, error)
	// inspect prints the model's graphs (hexserve inspect); o.path is what the user named.
	inspect func(file string, o inspectOptions, stdout, stderr io.Writer) int
	// root is the file or folder whose files the details list and digest.
	root func(path, file string) string
	// mk writes a model of the format with generated weights (hexserve mkmodel); nil in a
	// build without the writers.
	mk *mkWriter
	// emulation is bench --emulate's latency of the format's graphs; zero: plan.V79Costs'.
	emulation bench.Latency
}

// openArgs are what a format's open needs: runtime opens the QNN runtime (once; loadModel
// closes it if open fails).
type openArgs struct {
	cfg     config.Config
	file    string
	log     zerolog.Logger
	runtime func() (*qnn.Runtime, error)
}

// opened is a format's opened model with its tokenizer, and what the end-token rule and the
// load log need: dir is the model's folder, own where its own end tokens come from.
type opened struct {
	model    endTokenModel
	tok      *tokenizer.Tokenizer
	tokPath  string
	dir, own string
	loaded   *zerolog.Event
}

// inspectOptions are hexserve inspect's flags.
type inspectOptions struct {
	path            string
	asJSON          bool
	backend, system string
	arch            string
}

// modelKind is what a model path holds: a row of formats.
type modelKind = *format

var (
	kindGenie = &format{name: "genie", detect: detectGenie, probe: probeGenie, open: openGenie, inspect: inspectGenie, root: fileRoot,
		mk: mkGenie, emulation: genieV79}
	kindBundle = &format{name: "qhexrt", detect: detectBundle, probe: probeBundle, open: openBundle, inspect: inspectBundle, root: bundleDetailsRoot,
		mk: mkBundle}
	kindPTE = &format{name: "pte", detect: detectPTE, probe: probePTE, open: openPTE, inspect: inspectPTE, root: fileRoot,
		mk: mkPTE}
)

// formats are tried in order; a path none detects is read as a bundle, whose reader says
// what is missing.
var formats = []*format{kindGenie, kindBundle, kindPTE}

// locateModel detects what path names, from the content, and returns its format and the file
// or folder the format reads.
func locateModel(path string) (modelKind, string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, "", fmt.Errorf("model %s: %w", path, err)
	}
	for _, f := range formats {
		file, ok, err := f.detect(path, st)
		if err != nil {
			return nil, "", err
		}
		if ok {
			return f, file, nil
		}
	}
	return kindBundle, path, nil
}

// detectBundle: a file that is not a .pte is a manifest; a folder holding a manifest.json or an
// arch folder is a bundle.
func detectBundle(path string, st os.FileInfo) (string, bool, error) {
	if !st.IsDir() {
		// Only a regular file is opened here (a FIFO would block); the
		// bundle reader explains what anything else is.
		return path, !(st.Mode().IsRegular() && isPTE(path)), nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return "", false, fmt.Errorf("model %s: %w", path, err)
	}
	for _, e := range ents {
		if name := e.Name(); name == "manifest.json" || e.IsDir() && qhexrt.PlausibleArch(name) {
			return path, true, nil
		}
	}
	return "", false, nil
}

// detectPTE: a file starting with ExecuTorch's ET12 identifier, or a folder holding exactly
// one such .pte.
func detectPTE(path string, st os.FileInfo) (string, bool, error) {
	if !st.IsDir() {
		return path, st.Mode().IsRegular() && isPTE(path), nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return "", false, fmt.Errorf("model %s: %w", path, err)
	}
	var ptes []string
	for _, e := range ents {
		if name := e.Name(); e.Type().IsRegular() && strings.HasSuffix(name, ".pte") && isPTE(filepath.Join(path, name)) {
			ptes = append(ptes, name)
		}
	}
	switch len(ptes) {
	case 0:
		return "", false, nil
	case 1:
		return filepath.Join(path, ptes[0]), true, nil
	}
	return "", false, fmt.Errorf("model %s: the folder holds %d .pte files (%s); name one", path, len(ptes), strings.Join(ptes, ", "))
}

// fileRoot is the format's own file or folder.
func fileRoot(_, file string) string { return file }

// bundleDetailsRoot is the bundle folder, or a manifest's folder (bundleRoot).
func bundleDetailsRoot(path, _ string) string { return bundleRoot(path) }

func (f *format) String() string { return f.name }
