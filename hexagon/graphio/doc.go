// Package graphio holds what the model runners share at the graph
// boundary: tensor element types and their conversion (float32/16, 8- and
// 16-bit fixed point, raw int8/uint8/uint16/int32/uint32), logits views,
// attention-mask codes, KV-cache slot copies (row appends, transposed
// scatters, re-striding), runtime-buffer tensors, and the graph-call
// lifecycle (Lifecycle: check, timed execute, the cache invalid after a
// failure, reload after a device restart, close).
package graphio
