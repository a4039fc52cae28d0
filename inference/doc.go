// Package inference schedules generation requests onto one model and turns
// its logits into text: the bounded queue, the step-level scheduler over
// several sequences, the prefix cache, sampling, stop handling and
// streaming events.
//
// # Scheduling
//
// An Engine has one bounded FIFO queue and one worker goroutine that owns
// the Model. Submit validates a request and queues it, or fails at once with
// ErrBusy when the queue is full: it holds Config.QueueLen requests besides
// one for each sequence slot free now (MaxSequences less the open
// sequences), so a burst is refused only when the slots are taken too;
// active requests do not count. Every queued
// request gets exactly one final Done event: a request whose context ends
// while it waits leaves the queue immediately; an active one stops at the
// next step and its sequences' slots are released at once. Events go to a
// per-request unbounded buffer drained by a small goroutine, so the worker
// never waits for a reader.
//
// There is one path: a Model is a Batcher (its KV cache a pool of slots
// that sequences own), and one request at a time is MaxSequences 1 on the
// same scheduler. A request is one record from Submit to Done; its status
// (vLLM's RequestStatus) is waiting in the queue, running once admitted,
// finished at the end. Its choices are seqs: one sequence each, with its
// own sampler, detokenizer, drafter, constraint and stop strings, and a
// status of its own: running (open in the pool), preempted (released to
// make room) or finished with a FinishReason. Each step:
//
//  1. Admission: preempted sequences open again first, then queued
//     requests become active, in arrival order, while fewer than
//     Config.MaxSequences sequences are open and the model's pool can hold
//     them (Batcher.Open reserves the prompt plus up to growRows slots:
//     reserve); when the head of the queue does not fit, it and everything
//     behind it wait for a release (no large request starves behind small
//     ones). A sequence grows (Batcher.Grow) as it generates; one that
//     cannot waits, and when none can, the youngest is preempted: released,
//     its committed rows saved to the KV store (when there is one), and
//     restored or evaluated again once there is room (no new request
//     starts before it is back).
//  2. Gather and plan: gather ends cancelled or timed-out requests, grows
//     decoding sequences and asks the drafters for proposals; plan, a pure
//     function of what gather found, returns the step as a value (each
//     sequence's Run, draft and its source): one row for every decoding
//     sequence (round-robin from a rotating start when BatchLimits.Rows is
//     smaller, leaving a waiting prompt at least one), the rows left to
//     prompt chunks, oldest request first, what is left after that to
//     speculative draft rows (a Run of 1+k tokens), planned per sequence
//     from the acceptance estimate and StepCost. On a model whose step
//     costs the sum of its rows (StepCost(n) ≈ n·StepCost(1) for the
//     step's n decode rows, n ≥ 2: a
//     QHexRT-contract bundle runs each sequence's rows as calls of their
//     own), a step carries one decode row, round-robin, and a new prompt
//     gets a step without any, once in a row: grouping rows saves nothing
//     there and would make the prompt's first token wait for every
//     stream's call.
//     On a model that states an alignment (BatchLimits.Align: rows whose
//     bits depend on where their run started), prompt runs start at its
//     multiples counted from 0 and go whole in one step, and reused rows
//     are cut to such a multiple, so a seeded request repeats exactly.
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
// Fork its rows (or, when the pool cannot fork, open sequences of their own
// that evaluate the prompt again): the choices decode side by side. A new
// request (N = 1) forks the longest prefix of its prompt, at least
// minShareRows, that a live sequence of the same Request.Owner holds (a
// shared system prompt), or one that just finished: a finished sequence
// whose rows a queued request of its owner may fork stays in the pool until
// the next admission; when such a prefix is being evaluated and is at most
// shareWaitSteps steps' rows away, the request waits at the head of the
// queue for it (at most that many steps). Rows of different owners never
// share a Fork; the model keeps every sequence's attention to its own rows.
//
// # KV store
//
// With Config.KVStore and a model that is a SeqKVSnapshotter, the worker
// restores the owner's longest saved prefix of a prompt (all but its last
// token) into its new sequence before its first Run, and saves the first
// choice's committed rows (never rejected draft rows) under Request.Owner
// and Request.CacheKey before its Release; a preempted sequence's rows are
// saved and restored the same way. Restored rows count in
// Usage.CachedTokens. Both happen on the worker between Steps, so no
// request sees a sequence that is partly restored. This is how a later
// request reuses an earlier one's rows (one request at a time included):
// without a store, only a live or lingering sequence's rows are forked.
//
// # Context policy
//
// A prompt fits when prompt tokens + 1 ≤ ModelInfo.ContextLen; otherwise
// Submit returns *ContextLengthError. Each choice may generate up to
// ContextLen − prompt tokens; a MaxTokens of 0 or larger than that is clamped
// to it (not rejected). Reaching MaxTokens finishes the choice with
// FinishLength, reaching the window before it with FinishContext.
//
// With Request.ContextShift the window does not end a choice (it generates
// MaxTokens, 0: one window's worth, and finishes with FinishLength): when
// its next row would not fit, a quarter of the window is freed, keeping
// the sink (the prompt's first Request.Keep tokens) and the newest rows. A
// ContextShifter model evicts the oldest rows after the sink in place (see
// shift.go); on any other model, and where a ring's positions would pass
// MaxPositions, the kept tokens are read again at new positions, as prompt
// chunks beside the other sequences' decode rows. Until the first shift
// the tokens are the unshifted run's. A shifted sequence's rows are never
// saved to the KV store, taken over or forked: they are not the rows of a
// prefix of its tokens (its rows before the first shift are saved then). Each shift counts in hexserve_context_shifts_total
// {kind} and logs an INFO line.
//
// Request.Timeout (or Config.Timeout) limits the run time, not
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
