// Package graphio holds what the model runners share at the graph
// boundary: tensor element types and their conversion (float32/16, 8- and
// 16-bit fixed point, raw int8/uint8/uint16/int32/uint32), logits views,
// attention-mask codes, KV-cache slot copies (row appends, transposed
// scatters, re-striding) and runtime-buffer tensors.
package graphio
