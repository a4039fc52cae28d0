package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/hexserve/hexserve/hexagon/pte"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/internal/modelfile"
)

// isPTE says whether path is an ExecuTorch program (by its ET12 identifier).
func isPTE(path string) bool {
	f, _, err := modelfile.Open(path, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	var hdr [8]byte
	_, err = io.ReadFull(f, hdr[:])
	return err == nil && string(hdr[4:]) == "ET12"
}

type inspectedPTE struct {
	File     string             `json:"file"`
	Size     int64              `json:"size"`
	Header   pte.Header         `json:"header"`
	Segments []pte.DataSegment  `json:"segments"`
	Methods  []inspectedMethod  `json:"methods"`
	Metadata map[string]any     `json:"metadata"`
	Contexts []inspectedContext `json:"contexts"`
}

type inspectedMethod struct {
	Name         string              `json:"name"`
	Inputs       []inspectedValue    `json:"inputs"`
	Outputs      []inspectedValue    `json:"outputs"`
	Instructions []pte.Instruction   `json:"instructions"`
	Operators    []pte.Operator      `json:"operators"`
	Delegates    []inspectedDelegate `json:"delegates"`
}

type inspectedValue struct {
	Index int32     `json:"index"`
	Value pte.Value `json:"value"`
}

type inspectedDelegate struct {
	Backend       string           `json:"backend"`
	Location      pte.DataLocation `json:"location"`
	Segment       *uint32          `json:"segment,omitempty"`
	PayloadOffset int64            `json:"payload_offset"`
	PayloadSize   int              `json:"payload_size"`
	BinaryOffset  int64            `json:"context_binary_offset,omitempty"`
	BinarySize    uint64           `json:"context_binary_size,omitempty"`
	Signature     int64            `json:"signature,omitempty"`
	HeaderLen     int              `json:"payload_header_len,omitempty"`
	CompileSpec   *pte.QNNOptions  `json:"compile_spec,omitempty"`
}

// inspectedContext is one distinct context binary: the graphs the QNN
// system library read from it, or why there are none.
type inspectedContext struct {
	BinaryOffset int64            `json:"context_binary_offset"`
	Methods      []string         `json:"methods"`
	Graphs       []inspectedGraph `json:"graphs,omitempty"`
	Unavailable  string           `json:"tensors_unavailable,omitempty"`
}

// inspectPTE prints a .pte: its methods, delegates, metadata and compile
// spec, and the graphs' tensors where the QNN system library reads the
// context binary. A binary it cannot read (hostsim reads only its own
// format) is reported, not an error.
func inspectPTE(path string, o inspectOptions, stdout, stderr io.Writer) int {
	asJSON, backend, system := o.asJSON, o.backend, o.system
	f, err := pte.Open(path)
	if err != nil {
		fmt.Fprintln(stderr, "hexserve inspect:", err)
		return 1
	}
	defer f.Close()
	out := inspectedPTE{File: path, Size: f.Size, Header: f.Header, Segments: f.Segments, Metadata: map[string]any{}}
	for k, v := range f.Metadata {
		if len(v) == 1 {
			out.Metadata[k] = v[0]
		} else {
			out.Metadata[k] = v
		}
	}
	ctxAt := map[int64]int{}
	var binaries [][]byte
	for _, m := range f.Methods {
		if _, ok := f.Metadata[m.Name]; ok {
			continue
		}
		im := inspectedMethod{Name: m.Name, Instructions: m.Instructions, Operators: m.Operators,
			Inputs: values(m, m.Inputs), Outputs: values(m, m.Outputs), Delegates: []inspectedDelegate{}}
		for _, d := range m.Delegates {
			id := inspectedDelegate{Backend: d.ID, Location: d.Location, PayloadOffset: d.PayloadOffset, PayloadSize: len(d.Payload), CompileSpec: d.QNN}
			if d.Location == pte.Segment {
				seg := d.Index
				id.Segment = &seg
			}
			if d.Binary != nil {
				id.BinaryOffset, id.BinarySize, id.Signature, id.HeaderLen = d.BinaryOffset, d.Header.Size, d.Header.Signature, d.Header.Len
				i, ok := ctxAt[d.BinaryOffset]
				if !ok {
					i = len(out.Contexts)
					ctxAt[d.BinaryOffset] = i
					out.Contexts = append(out.Contexts, inspectedContext{BinaryOffset: d.BinaryOffset})
					binaries = append(binaries, d.Binary)
				}
				if c := &out.Contexts[i]; len(c.Methods) == 0 || c.Methods[len(c.Methods)-1] != m.Name {
					c.Methods = append(c.Methods, m.Name)
				}
			}
			im.Delegates = append(im.Delegates, id)
		}
		out.Methods = append(out.Methods, im)
	}
	be, sys := defaultQNNLibs(backend, system)
	rt, err := qnn.Open(qnn.Config{Backend: be, System: sys})
	for i := range out.Contexts {
		c := &out.Contexts[i]
		if err != nil {
			c.Unavailable = fmt.Sprintf("the QNN libraries did not load: %v", err)
			continue
		}
		graphs, gerr := rt.BinaryInfo(binaries[i])
		if gerr != nil {
			c.Unavailable = fmt.Sprintf("the QNN system library %s cannot read this context binary (%v); hostsim's reads only hostsim's own format, Qualcomm's libQnnSystem.so on a phone lists the tensors", sys, gerr)
			continue
		}
		c.Graphs = newInspectedFile(path, graphs).Graphs
	}
	if err == nil {
		rt.Close()
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return 1
		}
		return 0
	}
	printPTE(stdout, out)
	return 0
}

func values(m *pte.Method, idx []int32) []inspectedValue {
	out := make([]inspectedValue, len(idx))
	for i, v := range idx {
		out[i] = inspectedValue{Index: v, Value: m.Values[v]}
	}
	return out
}

func printPTE(w io.Writer, p inspectedPTE) {
	h := p.Header
	fmt.Fprintf(w, "%s: ExecuTorch program, %d bytes (flatbuffer %d B; segment data at %d, %d B; %d segment(s))\n",
		p.File, p.Size, h.ProgramSize, h.SegmentBase, h.SegmentDataSize, len(p.Segments))
	for _, m := range p.Methods {
		fmt.Fprintf(w, "method %s: %d input(s), %d output(s), %d instruction(s)\n", m.Name, len(m.Inputs), len(m.Outputs), len(m.Instructions))
		printInOut(w, m.Inputs, m.Outputs, func(tw io.Writer, label string, v inspectedValue) {
			if t := v.Value.Tensor; t != nil {
				fmt.Fprintf(tw, "  %s\tvalue %d\t%v\t%v\n", label, v.Index, t.Type, t.Sizes)
			} else {
				fmt.Fprintf(tw, "  %s\tvalue %d\t%v\t\n", label, v.Index, v.Value.Kind)
			}
		})
		for _, in := range m.Instructions {
			switch { // by instruction type
			case in.Kind == pte.DelegateCall:
				fmt.Fprintf(w, "  DelegateCall delegate %d args %v\n", in.Delegate, in.Args)
			case in.Kind == pte.KernelCall:
				fmt.Fprintf(w, "  KernelCall %s args %v\n", opName(m.Operators, in.Op), in.Args)
			default:
				fmt.Fprintf(w, "  %v\n", in.Kind)
			}
		}
		for i, d := range m.Delegates {
			loc := d.Location.String()
			if d.Segment != nil {
				loc = fmt.Sprintf("segment %d", *d.Segment)
			}
			fmt.Fprintf(w, "  delegate %d: %s, %s, payload at %d (%d B)", i, d.Backend, loc, d.PayloadOffset, d.PayloadSize)
			if d.HeaderLen != 0 {
				fmt.Fprintf(w, ", context binary at %d (%d B, %d-byte header), signature %d", d.BinaryOffset, d.BinarySize, d.HeaderLen, d.Signature)
			}
			fmt.Fprintln(w)
			if o := d.CompileSpec; o != nil {
				fmt.Fprintf(w, "    compile spec: soc %v, htp %v, vtcm %d MB, %v, %v, %v, %v, spill-fill %d B, multi-context %t, weight sharing %t, shared buffer %t, online prepare %t, from context binary %t, log %v\n",
					o.SocModel, o.HtpArch, o.VTCMMB, o.Backend, o.PerformanceMode, o.Precision, o.PdSession, o.MaxSpillFill,
					o.UseMultiContexts, o.UseWeightSharing, o.SharedBuffer, o.OnlinePrepare, o.IsFromContextBinary, o.LogLevel)
			}
		}
	}
	fmt.Fprintln(w, "metadata:")
	keys := make([]string, 0, len(p.Metadata))
	for k := range p.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, k := range keys {
		b, _ := json.Marshal(p.Metadata[k])
		fmt.Fprintf(tw, "  %s\t%s\n", k, b)
	}
	tw.Flush()
	for _, c := range p.Contexts {
		label := fmt.Sprintf("context binary at %d (%s)", c.BinaryOffset, strings.Join(c.Methods, ", "))
		if c.Unavailable != "" {
			fmt.Fprintf(w, "%s: tensors unavailable: %s\n", label, c.Unavailable)
			continue
		}
		printInspected(w, inspectedFile{File: label, Graphs: c.Graphs})
	}
}

func opName(ops []pte.Operator, i int32) string {
	if i < 0 || int(i) >= len(ops) {
		return fmt.Sprintf("operator %d", i)
	}
	if ops[i].Overload == "" {
		return ops[i].Name
	}
	return ops[i].Name + "." + ops[i].Overload
}
