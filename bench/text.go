package bench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
)

// WriteText writes the report as human-readable tables.
func WriteText(w io.Writer, rep *Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format+"\n", a...) }
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

	p("hexserve bench: %s (%s, V = %d, ctx %d, window %d)  quick=%v  %s, %d CPUs, %.1f s",
		rep.Bundle, rep.Model.Name, rep.Model.Vocab, rep.Model.ContextLen, rep.Model.PrefillWindow, rep.Quick, rep.GoVersion, rep.CPUs, rep.Seconds)
	p("workload: %d prompt tokens, %d decode tokens, %d runs; emulation prefill/decode/lm-head %d/%d/%d µs",
		rep.Workload.PromptTokens, rep.Workload.DecodeTokens, rep.Workload.Runs,
		rep.Workload.Emulation.PrefillUS, rep.Workload.Emulation.DecodeUS, rep.Workload.Emulation.LMHeadUS)
	p("")
	// Each section prints only when its phase ran.
	if len(rep.Native) > 0 {
		p("THROUGHPUT (hostsim speed)\tprefill tok/s p50\tdecode tok/s\tdecode step ms p50/p99\tTTFT ms p50/p99")
		for _, t := range rep.Native {
			p("  %s\t%.0f\t%.1f\t%.2f / %.2f\t%.1f / %.1f", t.Sampling, t.PrefillTokS.P50, t.DecodeTokS,
				t.DecodeStepMS.P50, t.DecodeStepMS.P99, t.TTFTMS.P50, t.TTFTMS.P99)
		}
		p("")
	}
	if len(rep.Host) > 0 {
		writeHost(p, rep.Host)
	}
	if len(rep.Streaming) > 0 {
		writeStreaming(p, rep.Streaming)
	}
	if pc := rep.PrefixCache; pc.HistoryTokens > 0 {
		p("PREFIX CACHE\thistory %d tokens, turn 2 %d tokens (%d cached): TTFT %.1f ms cached, %.1f ms uncached, ratio %.3f",
			pc.HistoryTokens, pc.Turn2Tokens, pc.CachedTokens, pc.TTFTCachedMS, pc.TTFTUncachedMS, pc.Ratio)
		p("")
	}
	if k := rep.KVStore; k.Skipped != "" {
		p("KV STORE\tskipped: %s", k.Skipped)
		p("")
	} else if k.Ratio > 0 {
		p("KV STORE\t%d conversations × %d turns, %d-token replies: turns 2… TTFT %.1f ms with the store, %.1f ms without, ratio %.3f; %d turns short of their history; store %d entries, %s",
			k.Conversations, k.Turns, k.ReplyTokens, k.TTFTWithMS, k.TTFTWithoutMS, k.Ratio, k.ShortTurns, k.Store.Entries, mib(k.Store.Bytes))
		p("  conversation/turn\tprompt\thistory\tcached with/without\tTTFT ms with/without")
		for _, d := range k.Detail {
			p("  %d/%d\t%d\t%d\t%d / %d\t%s / %s", d.Conversation, d.Turn, d.PromptTokens, d.HistoryTokens, d.CachedWith, d.CachedWithout, msOrDash(d.TTFTWithMS), msOrDash(d.TTFTWithoutMS))
		}
		p("")
	}
	writeRest(p, rep, mib)
	return tw.Flush()
}

// writeHost writes the host phase's tables.
func writeHost(p func(string, ...any), host []HostTime) {
	p("HOST TIME per decode token (µs)\twall p50\tp99\tsampling\tmodel I/O\tdetokenise\trest\t(graph ms p50)")
	for _, h := range host {
		p("  %s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f", h.Sampling, h.TotalUS.P50, h.TotalUS.P99,
			h.Split.Sampling, h.Split.ModelIO, h.Split.Detokenise, h.Split.Rest, h.GraphMS.P50)
	}
	p("HOST THREAD CPU per decode token (µs)\tp50\tp99\tsampling\tmodel I/O\tengine (replay warm / cold)\tper token: preempted / blocked / minor faults (engine's) / run-queue µs")
	for _, h := range host {
		p("  %s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f (%.1f / %.1f)\t%.2f / %.2f / %.2f (%.2f) / %.1f", h.Sampling, h.CPUUS.P50, h.CPUUS.P99,
			h.CPUSplit.Sampling, h.CPUSplit.ModelIO, h.CPUSplit.Engine, h.CPUSplit.EngineWarm, h.CPUSplit.EngineCold,
			h.Thread.InvolSwitches, h.Thread.VolSwitches, h.Thread.MinorFaults, h.Thread.EngineMinorFaults, h.Thread.RunDelayUS)
	}
	for _, h := range host {
		if h.RawCPUUS.N > 0 && h.RawCPUUS.P50 > h.CPUUS.P50 {
			p("  %s: p50 %.1f as the thread clock reads it (parts not bounded by their wall time)", h.Sampling, h.RawCPUUS.P50)
		}
	}
	for _, h := range host {
		if h.IO.KVCopyBackground > 0 {
			p("  %s: KV copy µs per decode token p50: %.1f on the critical path (in model I/O), %.1f in the background", h.Sampling, h.IO.KVCopy, h.IO.KVCopyBackground)
		}
	}
	p("")
}

// writeStreaming writes the streaming phases' table.
func writeStreaming(p func(string, ...any), streaming []Streaming) {
	p("STREAMING\tengine tok/s\tdelivered tok/s\tefficiency\tdecode tok/s\tTTFT ms p50\ttoken delay ms p50/p99 (held)\trelease delay ms p50/p99\trequests")
	for _, s := range streaming {
		if s.Error != "" {
			p("  %s\terror: %s", s.Transport, s.Error)
			continue
		}
		p("  %s\t%.2f\t%.2f\t%.4f\t%.2f\t%.1f\t%.3f/%.3f (%d of %d)\t%.3f/%.3f\t%d", s.Transport, s.EngineTokS, s.DeliveredTokS, s.Efficiency,
			s.DecodeTokS, s.TTFTMS.P50, s.TokenDelayMS.P50, s.TokenDelayMS.P99, s.HeldTokens, s.TokenDelayMS.N,
			s.ReleaseDelayMS.P50, s.ReleaseDelayMS.P99, s.Requests)
	}
	p("")
}

// writeRest writes the sections after the KV store's.
func writeRest(p func(string, ...any), rep *Report, mib func(int64) string) {
	if len(rep.Speculative) > 0 {
		p("SPECULATIVE (decode tok/s)	prompt	output	off	on	ratio	goal	accepted/rejected")
		for _, s := range rep.Speculative {
			if s.Error != "" {
				p("  %s	%d	%d	error: %s", s.Workload, s.PromptTokens, s.OutputTokens, s.Error)
				continue
			}
			p("  %s	%d	%d	%.1f	%.1f	%.2f×	≥ %.2f×	%d / %d", s.Workload, s.PromptTokens, s.OutputTokens,
				s.OffTokS, s.OnTokS, s.Ratio, s.Goal, s.Accepted, s.Rejected)
		}
		p("")
	}
	if c := rep.Concurrency; c != nil && len(c.SideBySide) > 0 {
		p("CONCURRENCY (aggregate tok/s, %d-token prompts, %d tokens each)\tone at a time\tside by side\t× one stream\tceiling ×\tcalls/token\tms/call\thost share", c.PromptTokens, c.OutputTokens)
		for _, k := range concurrencyKeys {
			side, ok := c.SideBySide[k]
			if !ok {
				continue
			}
			serial, x := "–", side/c.SideBySide["1"]
			if v, ok := c.Serial[k]; ok {
				serial = fmt.Sprintf("%.1f", v)
			}
			if k == "n4" {
				x = side / c.Serial["n4"]
			}
			p("  %s\t%s\t%.1f\t%.2f\t%.2f\t%.3f\t%.1f\t%.1f%%", k, serial, side, x, c.Ceiling[k], c.CallsPerToken[k], c.CallMS[k], 100*c.HostShare[k])
		}
		serial := "–" // not measured (the default run)
		if c.SerialTTFTMS > 0 {
			serial = fmt.Sprintf("%.0f ms", c.SerialTTFTMS)
		}
		p("  TTFT under 4-stream load\t%s\tp50 %.0f ms, p99 %.0f ms\t\tceiling %.0f ms (one step)", serial, c.TTFTMS.P50, c.TTFTMS.P99, c.TTFTCeilingMS)
		for _, g := range slices.Sorted(maps.Keys(c.CallCostMS)) {
			p("  learned cost of one %s call\t%.1f ms", g, c.CallCostMS[g])
		}
		p("")
	}
	if b := rep.Burst; b != nil && len(b.Ratio) > 0 {
		p("BURST (%d clients at once, %d–%d-token prompts, %d tokens each; max_sequences %d)\talone tok/s\tat once tok/s\t× one alone", burstClients,
			burstMinPrompt, burstMinPrompt+burstPromptStep*(burstClients-1), b.OutputTokens, b.MaxSequences)
		for i, x := range b.Ratio {
			p("  round %d\t%.1f\t%.1f\t%.2f", i+1, b.AloneTokS[i], b.BurstTokS[i], x)
		}
		p("")
	}
	if c := rep.Context; c != nil {
		p("CONTEXT SHIFT (%s, %s; %d-token prompt, %d-token sink, %d tokens, %d-token window, %d shifts)\tp50 ms/token\tamortised ms/token",
			c.Kind, c.Shift, c.Prompt, c.Sink, c.Output, c.Window, c.Shifts)
		p("  before the window\t%.2f\t%.2f", c.BeforeMS.P50, c.AmortisedBeforeMS)
		p("  past the window\t%.2f (× %.3f)\t%.2f (× %.3f)", c.AfterMS.P50, c.MedianRatio, c.AmortisedAfterMS, c.Ratio)
		p("  cost per shift\t\t%.1f ms", c.PerShiftMS)
		p("")
	}
	p("MEMORY\tVmRSS\tRssAnon\tRssFile\tRssShmem\tGo heap inuse\tGo runtime (Sys−released)")
	for _, m := range rep.Memory.Snapshots {
		p("  %s\t%s\t%s\t%s\t%s\t%s\t%s", m.Stage, mib(m.VmRSS), mib(m.RssAnon), mib(m.RssFile), mib(m.RssShmem), mib(m.GoHeapInuse), mib(m.GoRuntime))
	}
	p("  model files\t%s", mib(rep.Memory.ModelFiles))
	for _, f := range rep.Memory.MappedFiles {
		p("  mapped %s\tsize %s\tmapped %s\tresident %s", f.Path, mib(f.Size), mib(f.Map), mib(f.RSS))
	}
	p("")
	if t := rep.Tokenizer; t.Bytes > 0 {
		p("TOKENIZER\t%.2f MB/s p50 (%d bytes, %d tokens, %.0f tokens/s; HF reference %.1f MB/s)", t.MBps.P50, t.Bytes, t.Tokens, t.TokensPerS, t.Reference)
		p("")
	}
	if st := rep.Structured; st != nil {
		p("STRUCTURED\tV = %d: constraint %.1f µs/token p50, %.1f p99 wall (thread CPU %.1f p50, %.1f p99); %d tokens, %.0f%% needed the full mask; compile %.3f ms max; index %.0f ms once",
			st.Vocab, st.MaskUS.P50, st.MaskUS.P99, st.MaskCPUUS.P50, st.MaskCPUUS.P99, st.Tokens, 100*st.FullMasks, st.CompileMS.Max, st.IndexMS)
		p("")
	}
	p("GOAL\tmeasured\ttarget\tresult\tceiling")
	for _, g := range rep.Goals {
		res := "PASS"
		if !g.Pass {
			res = "FAIL"
		}
		ceiling := ""
		if g.Ceiling > 0 {
			ceiling = fmt.Sprintf("%.3f %s", g.Ceiling, g.Unit)
		}
		p("  %s\t%.3f %s\t%s %g %s\t%s\t%s", g.Name, g.Measured, g.Unit, g.Op, g.Target, g.Unit, res, ceiling)
	}
}

// msOrDash prints a time in ms, or – for one not measured (0).
func msOrDash(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", v)
}
