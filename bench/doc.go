// Package bench is the fixed workload behind `hexserve bench`: it measures
// the host side of generation (time per decode token outside graph
// execution, split by what it does), prefill and decode speed, time to
// first token, streaming efficiency (in-process and through the HTTP server
// with SSE clients), the prefix cache's effect on a chat's second turn,
// memory (RSS, Go heap, mapped model files) and tokenizer speed, and
// checks each against the project's goals.
//
// The workload and every figure's definition are documented in
// docs/performance.md. Run drives it against any inference.Model, with its
// counters when Loaded.Counters reads them; the hexserve command passes the
// runner itself and reads its graph statistics, tests use fakes.
package bench
