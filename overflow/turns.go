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
// without their call. System messages belong to no turn of their own.
func Turns(msgs []chat.Message) []Turn {
	var turns []Turn
	user := false // the current turn has a user message
	for i, m := range msgs {
		switch {
		case System(m):
			continue
		case len(turns) == 0:
			turns = append(turns, Turn{Start: i})
		case m.Role == "user" && user:
			turns[len(turns)-1].End = i
			turns = append(turns, Turn{Start: i})
		}
		user = user || m.Role == "user"
		turns[len(turns)-1].End = i + 1
	}
	for i, m := range msgs {
		if m.Role != "tool" && m.Role != "ipython" {
			continue
		}
		if c := callOf(msgs, i); c >= 0 {
			turns = join(turns, c, i)
		}
	}
	return turns
}

// callOf is the index of the assistant message whose call the tool result
// msgs[i] answers, or -1.
func callOf(msgs []chat.Message, i int) int {
	id := msgs[i].ToolCallID
	nearest := -1
	for j := i - 1; j >= 0; j-- {
		if msgs[j].Role != "assistant" || len(msgs[j].ToolCalls) == 0 {
			continue
		}
		if id == "" {
			return j
		}
		if nearest < 0 {
			nearest = j
		}
		for _, c := range msgs[j].ToolCalls {
			if c.ID == id {
				return j
			}
		}
	}
	return nearest
}

// join merges the turns holding messages a and b (a < b) and those between.
func join(turns []Turn, a, b int) []Turn {
	first, last := -1, -1
	for k, t := range turns {
		if t.has(a) {
			first = k
		}
		if t.has(b) {
			last = k
		}
	}
	if first < 0 || last <= first {
		return turns
	}
	turns[first].End = turns[last].End
	return append(turns[:first+1], turns[last+1:]...)
}
