package overflow

import "github.com/hexserve/hexserve/chat"

// Turn is the span [Start, End) of a conversation's messages that
// truncation keeps or leaves out whole; the system messages inside it are
// kept either way.
type Turn struct{ Start, End int }

func (t Turn) has(i int) bool { return t.Start <= i && i < t.End }

// System reports whether m is kept whatever the policy: a system message
// (the APIs map developer messages and Anthropic's system to it).
func System(m chat.Message) bool { return m.Role == "system" || m.Role == "developer" }

// Turns splits msgs into turns: each starts at a user message and runs up
// to the next one, except that what comes before the first user message
// belongs to the first turn; and a tool result's turn is joined with its
// call's (by tool_call_id, else the nearest assistant message with tool
// calls before it), so no turn holds a call without its results or results
// without their call. System messages belong to no turn of their own. It
// takes one pass over msgs and their calls.
func Turns(msgs []chat.Message) []Turn {
	var turns []Turn
	turnOf := make([]int, len(msgs)) // the turn of each message (system: the one it sits in)
	user := false                    // the current turn has a user message
	for i, m := range msgs {
		switch {
		case System(m):
		case len(turns) == 0:
			turns = append(turns, Turn{Start: i})
		case m.Role == "user" && user:
			turns[len(turns)-1].End = i
			turns = append(turns, Turn{Start: i})
		}
		if len(turns) > 0 && !System(m) {
			user = user || m.Role == "user"
			turns[len(turns)-1].End = i + 1
		}
		turnOf[i] = len(turns) - 1
	}
	// reach[k] is the last turn that turn k must be joined with.
	reach := make([]int, len(turns))
	for k := range reach {
		reach[k] = k
	}
	calls := map[string]int{} // call id → its assistant message
	last := -1                // the latest assistant message with calls
	for i, m := range msgs {
		switch {
		case m.Role == "assistant" && len(m.ToolCalls) > 0:
			last = i
			for _, c := range m.ToolCalls {
				if c.ID != "" {
					calls[c.ID] = i
				}
			}
		case m.Role == "tool" || m.Role == "ipython":
			c, ok := calls[m.ToolCallID]
			if !ok || m.ToolCallID == "" {
				c = last
			}
			if c >= 0 {
				reach[turnOf[c]] = max(reach[turnOf[c]], turnOf[i])
			}
		}
	}
	return joined(turns, reach)
}

// joined merges each turn k with the turns up to reach[k] (and, through
// them, up to theirs).
func joined(turns []Turn, reach []int) []Turn {
	out := turns[:0]
	for k := 0; k < len(turns); {
		t, end := turns[k], reach[k]
		for j := k + 1; j <= end; j++ {
			end = max(end, reach[j])
		}
		t.End = turns[end].End
		out = append(out, t)
		k = end + 1
	}
	return out
}
