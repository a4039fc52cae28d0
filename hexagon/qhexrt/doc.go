// Package qhexrt serves QHexRT bundles: it loads a bundle's context binaries
// through hexagon/qnn, checks every tensor binding against the binaries' own
// metadata, and implements inference.Model with an mmap'd embedding table,
// RoPE tables, attention masks and a host-held KV cache bound once to the
// prefill and decode graphs, with the NPU lm-head for the logits.
package qhexrt
