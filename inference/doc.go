// Package inference schedules generation requests onto one model (batch 1, one
// resident KV cache) and turns its logits into text: the bounded queue and its
// worker, the prefix cache, sampling, stop handling and streaming events.
//
// # Scheduling
//
// An Engine has one bounded FIFO queue (Config.QueueLen; the running request
// does not count) and one worker goroutine that owns the Model. Submit
// validates a request and queues it, or fails at once with ErrBusy when the
// queue is full. Every queued request gets exactly one final Done event:
// a request whose context ends while it waits leaves the queue immediately;
// a running one stops at the next decode step (the model checks its context
// between graph calls). Events go to a per-request unbounded buffer drained by
// a small goroutine, so the worker never waits for a reader.
//
// # Prefix cache
//
// The engine remembers which tokens' KV rows the model holds and passes the
// longest common prefix to Model.Eval as valid (at most len(seq)-1, since Eval
// must produce logits); Usage.CachedTokens reports the prompt rows the model
// reused. A failed Eval forgets the rows. Choices (Request.N) run one after
// another and reuse the prompt's rows.
//
// # KV store
//
// With Config.KVStore and a model that is a KVSnapshotter, the worker saves
// the committed rows of each finished request (only those the store lacks)
// under Request.Owner and Request.CacheKey, and before a request's first
// Eval restores owner's longest saved prefix of the prompt when it beats the
// resident match. Restored rows count as reused in Usage.CachedTokens. Both
// happen on the worker between model calls, so no request sees a cache that
// is partly restored.
//
// # Context policy
//
// A prompt fits when prompt tokens + 1 ≤ ModelInfo.ContextLen; otherwise
// Submit returns *ContextLengthError. Each choice may generate up to
// ContextLen − prompt tokens; a MaxTokens of 0 or larger than that is clamped
// to it (not rejected), and reaching it finishes the choice with
// FinishLength. Request.Timeout (or Config.Timeout) limits the run time, not
// the queue wait: it finishes with FinishTimeout and no error.
//
// # Sampling
//
// Over the full vocabulary, reading the logits in their native type (F32,
// F16, U16 fixed point) with no conversion pass. The order is llama.cpp's:
// penalties and logit bias → top_k → softmax with temperature → top_p → min_p.
//   - Repetition penalty (llama.cpp): every earlier token of the sequence
//     (prompt and generated); a positive logit is divided, a negative one
//     multiplied. Then frequency and presence penalties (OpenAI): over the
//     choice's generated tokens, logit −= count·frequency + (count > 0)·presence.
//     Then logit_bias is added (−100 effectively bans a token).
//   - Temperature 0 is greedy: argmax, ties to the lowest id.
//   - Tokens more than 20·T below the best logit (weight < 2e-9 each) are
//     ignored; see sampleCutoff for the error bound.
//   - A seed makes a request reproducible (same prompt, parameters and
//     seed → same output); without one the engine draws a random seed.
//   - Logprobs are the log-softmax of the raw logits, before penalties and
//     temperature, as OpenAI reports them.
//
// # Text
//
// End-of-turn tokens (ModelInfo.EOS) end a choice with FinishStop and are not
// emitted; other special tokens are never emitted as text. Stop strings
// (at most MaxStops) match across token boundaries: text that might begin
// one is held back until decided, and the emitted text never contains it.
// A choice stops as soon as a token completes a stop string (as OpenAI
// does); the text is cut at the earliest stop string it then contains.
// Text is emitted as complete UTF-8; incomplete bytes at the end of a
// choice become U+FFFD. Token ids and logprobs travel with their text, so a
// token inside a stop string is not reported. Usage.CompletionTokens counts
// every sampled token, the end-of-turn token included.
//
// # Health
//
// Healthy reports an error after 3 consecutive failed model calls and
// clears it on the next successful one (the next request's). A model
// failure fails only the request in flight (FinishError, Done.Err).
package inference
