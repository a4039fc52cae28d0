package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/hexserve/hexserve/hexagon/qhexrt/bundle"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/internal/modelfile"
)

// runInspect implements `hexserve inspect [--json] [--backend PATH --system PATH] [--arch vNN] PATH`:
// it prints every graph of a bundle's (or one file's) context binaries with
// its inputs and outputs, as the QNN system library reports them; for an
// ExecuTorch .pte it prints the container too (inspect_pte.go).
func inspect(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("inspect", stdout, stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	backend := fs.String("backend", "", "path of libQnnHtp.so (default: hostsim's under build/hostsim/<goarch>/ when built, else libQnnHtp.so)")
	system := fs.String("system", "", "path of libQnnSystem.so (default: as --backend)")
	arch := fs.String("arch", bundle.DefaultArch, "DSP architecture folder of a bundle directory")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: hexserve inspect [--json] [--backend PATH --system PATH] [--arch vNN] BUNDLE|ARCH_DIR|MANIFEST|CONTEXT_BIN|FILE.pte|GENIE_DIR")
		fs.PrintDefaults()
	}
	rest, err := parseFlags(fs, args)
	if err != nil {
		return exitCode(err)
	}
	switch {
	case len(rest) == 0:
		fmt.Fprintln(stderr, "hexserve inspect: a bundle or context binary PATH is required")
		fs.Usage()
		return 2
	case len(rest) > 1:
		fmt.Fprintf(stderr, "hexserve inspect: unexpected argument %q (one PATH only)\n", rest[1])
		return 2
	}
	o := inspectOptions{path: rest[0], asJSON: *asJSON, backend: *backend, system: *system, arch: *arch}
	kind, file, err := locateModel(o.path)
	if err != nil {
		kind, file = kindBundle, o.path // a context binary, or the bundle reader's error
	}
	return kind.inspect(file, o, stdout, stderr)
}

// inspectBundle prints the graphs of a bundle's (or one file's) context binaries.
func inspectBundle(_ string, o inspectOptions, stdout, stderr io.Writer) int {
	files, err := inspectFiles(o.path, o.arch)
	if err != nil {
		fmt.Fprintln(stderr, "hexserve inspect:", err)
		return 1
	}
	be, sys := defaultQNNLibs(o.backend, o.system)
	rt, err := qnn.Open(qnn.Config{Backend: be, System: sys})
	if err != nil {
		fmt.Fprintln(stderr, "hexserve inspect:", err)
		return 1
	}
	defer rt.Close()

	var out []inspectedFile
	status := 0
	for _, f := range files {
		graphs, ok := binaryGraphs(rt, f, stderr)
		if !ok {
			status = 1
			continue
		}
		out = append(out, newInspectedFile(f, graphs))
	}
	if o.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return 1
		}
		return status
	}
	for _, f := range out {
		printInspected(stdout, f)
	}
	return status
}

// inspectFiles resolves PATH to the context binaries to inspect.
func inspectFiles(path, arch string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() && !strings.EqualFold(filepath.Ext(path), ".json") {
		return []string{path}, nil
	}
	b, err := bundle.Read(path, arch)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var files []string
	keys := make([]string, 0, len(b.Manifest.Artifacts.Contexts))
	for k := range b.Manifest.Artifacts.Contexts {
		keys = append(keys, k)
	}
	rank := map[string]int{"prefill": 0, "decode": 1, "shared": 2, "lmhead": 3}
	sort.Slice(keys, func(i, j int) bool {
		ri, iok := rank[keys[i]]
		rj, jok := rank[keys[j]]
		if iok != jok {
			return iok
		}
		if ri != rj {
			return ri < rj
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		f := b.Manifest.Artifacts.Contexts[k].Bin
		if f == "" {
			continue
		}
		if !filepath.IsAbs(f) {
			f = filepath.Join(b.Dir, f)
		}
		if !seen[f] {
			seen[f] = true
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: the manifest names no context binaries", path)
	}
	return files, nil
}

// binaryGraphs maps the context binary f (only the pages the system library reads are loaded,
// never the whole file into the heap) and lists its graphs; a failure is reported on stderr.
func binaryGraphs(rt *qnn.Runtime, f string, stderr io.Writer) ([]qnn.GraphInfo, bool) {
	buf, err := modelfile.Map(f, 0)
	if err == nil && buf == nil {
		err = fmt.Errorf("%s: empty file", f)
	}
	if err != nil {
		fmt.Fprintln(stderr, "hexserve inspect:", err)
		return nil, false
	}
	defer modelfile.Unmap(buf)
	graphs, err := rt.BinaryInfo(buf)
	if err != nil {
		fmt.Fprintf(stderr, "hexserve inspect: %s: %v\n", f, err)
		return nil, false
	}
	return graphs, true
}

// defaultQNNLibs fills in hostsim's libraries when they are built, else the
// loader-path names of Qualcomm's.
func defaultQNNLibs(backend, system string) (string, string) {
	dir := filepath.Join("build", "hostsim", runtime.GOARCH)
	if exe, err := os.Executable(); err == nil {
		// bin/hexserve next to build/: prefer the checkout's hostsim.
		if alt := filepath.Join(filepath.Dir(filepath.Dir(exe)), dir); fileExists(filepath.Join(alt, "libQnnHtp.so")) && !fileExists(filepath.Join(dir, "libQnnHtp.so")) {
			dir = alt
		}
	}
	pick := func(given, name string) string {
		if given != "" {
			return given
		}
		if p := filepath.Join(dir, name); fileExists(p) {
			abs, err := filepath.Abs(p)
			if err == nil {
				return abs
			}
			return p
		}
		return name
	}
	return pick(backend, "libQnnHtp.so"), pick(system, "libQnnSystem.so")
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

type inspectedFile struct {
	File   string           `json:"file"`
	Graphs []inspectedGraph `json:"graphs"`
}

type inspectedGraph struct {
	Name    string            `json:"name"`
	Inputs  []inspectedTensor `json:"inputs"`
	Outputs []inspectedTensor `json:"outputs"`
}

type inspectedTensor struct {
	Name     string          `json:"name"`
	ID       uint32          `json:"id"`
	Type     string          `json:"tensor_type"`
	DataType string          `json:"data_type"`
	Dims     []uint32        `json:"dims"`
	Quant    *inspectedQuant `json:"quant,omitempty"`
}

type inspectedQuant struct {
	Encoding string    `json:"encoding"`
	Scale    float32   `json:"scale,omitempty"`
	Offset   int32     `json:"offset,omitempty"`
	Axis     *int32    `json:"axis,omitempty"`
	Scales   []float32 `json:"scales,omitempty"`
	Offsets  []int32   `json:"offsets,omitempty"`
}

func newInspectedFile(path string, graphs []qnn.GraphInfo) inspectedFile {
	f := inspectedFile{File: path, Graphs: []inspectedGraph{}}
	conv := func(ts []qnn.TensorInfo) []inspectedTensor {
		out := make([]inspectedTensor, 0, len(ts))
		for _, t := range ts {
			it := inspectedTensor{Name: t.Name, ID: t.ID, Type: t.Type.String(), DataType: t.DataType.String(), Dims: t.Dims}
			if it.Dims == nil {
				it.Dims = []uint32{}
			}
			switch t.Quant.Encoding {
			case qnn.QuantUndefined:
			case qnn.QuantScaleOffset, qnn.QuantBwScaleOffset:
				it.Quant = &inspectedQuant{Encoding: quantName(t.Quant.Encoding), Scale: t.Quant.Scale, Offset: t.Quant.Offset}
			default:
				axis := t.Quant.Axis
				it.Quant = &inspectedQuant{Encoding: quantName(t.Quant.Encoding), Axis: &axis, Scales: t.Quant.Scales, Offsets: t.Quant.Offsets}
			}
			out = append(out, it)
		}
		return out
	}
	for _, g := range graphs {
		f.Graphs = append(f.Graphs, inspectedGraph{Name: g.Name, Inputs: conv(g.Inputs), Outputs: conv(g.Outputs)})
	}
	return f
}

func quantName(e qnn.QuantEncoding) string {
	switch e {
	case qnn.QuantScaleOffset:
		return "scale_offset"
	case qnn.QuantAxisScaleOffset:
		return "axis_scale_offset"
	case qnn.QuantBwScaleOffset:
		return "bw_scale_offset"
	case qnn.QuantBwAxisScaleOffset:
		return "bw_axis_scale_offset"
	}
	return fmt.Sprintf("encoding(%d)", uint32(e))
}

func printInspected(w io.Writer, f inspectedFile) {
	fmt.Fprintf(w, "%s: %d graph(s)\n", f.File, len(f.Graphs))
	for _, g := range f.Graphs {
		fmt.Fprintf(w, "  graph %q\n", g.Name)
		printInOut(w, g.Inputs, g.Outputs, func(tw io.Writer, label string, t inspectedTensor) {
			q := ""
			if t.Quant != nil {
				if t.Quant.Axis != nil {
					q = fmt.Sprintf("%s axis=%d (%d scales)", t.Quant.Encoding, *t.Quant.Axis, len(t.Quant.Scales))
				} else {
					q = fmt.Sprintf("%s scale=%g offset=%d", t.Quant.Encoding, t.Quant.Scale, t.Quant.Offset)
				}
			}
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%v\t%s\n", label, t.Name, t.Type, t.DataType, t.Dims, q)
		})
	}
}

// printInOut writes row's line for each of in, then each of out, labelled
// "in" and "out", with their columns aligned.
func printInOut[T any](w io.Writer, in, out []T, row func(tw io.Writer, label string, v T)) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, v := range in {
		row(tw, "in", v)
	}
	for _, v := range out {
		row(tw, "out", v)
	}
	tw.Flush()
}
