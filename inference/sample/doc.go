// Package sample turns a row of logits into the next token: penalties and
// logit bias, top_k, temperature, top_p, min_p, seeded draws, logprobs and
// constrained draws, over the full vocabulary in the logits' native type
// (F32, F16, U16 fixed point) with no conversion pass.
//
// A Sampler is one sequence's state (parameters, random stream, penalties:
// a few KiB plus a bit per vocabulary id). The vocabulary-sized work of a
// step (candidate buffers, histograms) lives in a Scratch that the sampling
// goroutine owns and passes to Sample; Workers is a small fixed set of such
// goroutines that samples a step's rows in parallel. Nothing of a sequence
// stays in a Scratch, so a sequence's tokens do not depend on which
// goroutine sampled them.
//
// A step takes one of three paths: candidate collection when few tokens are
// within reach of the best (collect.go, filter.go), the bucket histogram for
// nearly flat F32 logits (buckets.go), and the 16-bit code histogram for F16
// and U16 logits (codes.go). Tokens more than 20·T below the best logit are
// ignored (see sampleCutoff for the error bound); greedy, top_k and min_p
// are exact. The vocabulary scans are internal/scan's vector kernels.
//
// package inference drives it; its requests, results and models use this
// package's value types (Logits, Params, Logprob) directly.
package sample
