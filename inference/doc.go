// Package inference schedules generation requests onto one model and turns
// its logits into text: the bounded queue, the step-level scheduler over
// several sequences, the prefix cache, sampling, stop handling and
// streaming events.
//
// # Scheduling
//
// An Engine has one bounded FIFO queue (Config.QueueLen; active requests do
// not count) and one worker goroutine that owns the Model. Submit validates
// a request and queues it, or fails at once with ErrBusy when the queue is
// full. Every queued request gets exactly one final Done event: a request
// whose context ends while it waits leaves the queue immediately; an active
// one stops at the next step and its sequences' slots are released at once.
// Events go to a per-request unbounded buffer drained by a small goroutine,
// so the worker never waits for a reader.
//
// The worker runs steps. A request's generation is a gen (its choices are
// seqs: one sequence each, with its own sampler, detokenizer, drafter,
// constraint and stop strings). Each step:
//
//  1. Admission: queued requests become active, in arrival order, while
//     fewer than Config.MaxSequences sequences are active and the model's
//     pool can hold them (Batcher.Open reserves the prompt plus up to
//     growRows slots); when the head of the queue does not fit, it and
//     everything behind it wait for a release (no large request starves
//     behind small ones). A sequence grows (Batcher.Grow) as it generates;
//     one that cannot waits, and when none can, the youngest is released
//     and evaluates its rows again once there is room (no new request
//     starts before it is back).
//  2. Rows: every decoding sequence gets one row (all of them every step,
//     round-robin from a rotating start when BatchLimits.Rows is smaller);
//     the rows left go to prompt chunks, oldest request first; what is left
//     after that goes to speculative draft rows (a Run of 1+k tokens),
//     planned per sequence from the acceptance estimate and StepCost.
//  3. One Batcher.Step carries all runs; the model picks its graph calls
//     from measured costs (one multi-row call, or decode calls).
//  4. Sampling: each run's rows are read in order and sampled by its
//     sequence; a finished, cancelled or timed-out sequence is released
//     (after saving its rows to the KV store) before the next step. Plain
//     decode rows (no draft, no constraint) of HeldRows are sampled in
//     parallel by a few helper goroutines (at most 3, GOMAXPROCS − 1)
//     and then taken in order: each sequence has its own sampler and
//     random stream, so its tokens do not depend on the parallelism.
//
// So a new request starts within a step of arriving when a sequence is free
// (its prompt goes in the next step's spare rows), no request waits for
// another's whole answer, and every active sequence advances every step.
// With Request.N > 1 the first choice prefills the prompt and the others
// Fork its rows: the choices decode side by side. A new request (N = 1)
// forks the longest prefix of its prompt, at least minShareRows, that a
// live sequence of the same Request.Owner holds (a shared system prompt),
// or one that just finished: a finished sequence whose rows a queued
// request of its owner may fork stays in the pool until the next
// admission;
// when such a prefix is being evaluated and is at most shareWaitSteps
// steps' rows away, the request waits at the head of the queue for it
// (at most that many steps). Rows of different owners never share a Fork;
// the model keeps every sequence's attention to its own rows. A sequence
// released to make room is saved to the KV store first (when there is one)
// and restored when it opens again; only the rows the store lost are
// evaluated again.
//
// A Model without Batcher is driven through the same scheduler by an
// adapter with one sequence (MaxSequences 1): a step is an Eval (or a
// Verify), exactly as before the pool existed.
//
// # Prefix cache
//
// One request at a time, the engine remembers which tokens' KV rows the model holds and passes the
// longest common prefix to Model.Eval as valid (at most len(seq)-1, since Eval
// must produce logits); Usage.CachedTokens reports the prompt rows the model
// reused. A failed Eval forgets the rows. On a model without Batcher,
// choices (Request.N) run one after another and reuse the prompt's rows.
//
// # KV store
//
// Side by side (a Batcher that is a SeqKVSnapshotter), the worker restores
// the owner's longest saved prefix of a prompt into its new sequence before
// its first Run, and saves the first choice's committed rows before its
// Release. One request at a time: with Config.KVStore and a model that is a KVSnapshotter, the worker saves
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
//     ignored; package sample (inference/sample) gives the error bound.
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
