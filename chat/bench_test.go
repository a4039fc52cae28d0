package chat

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"
)

func benchConversation() ([]Message, Options) {
	tool := json.RawMessage(`{"type":"function","function":{"name":"get_current_weather","description":"Get the current weather for a city.","parameters":{"type":"object","properties":{"city":{"type":"string","description":"City name"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}}}`)
	msgs := []Message{{Role: "system", Content: "You are a helpful assistant."}}
	for i := 0; i < 10; i++ {
		msgs = append(msgs,
			Message{Role: "user", Content: strings.Repeat("What is the weather like in Paris today? ", 5)},
			Message{Role: "assistant", ToolCalls: []ToolCall{{Name: "get_current_weather", Arguments: json.RawMessage(`{"city":"Paris","unit":"celsius"}`)}}},
			Message{Role: "tool", Content: `{"temperature": 18, "condition": "cloudy"}`},
			Message{Role: "assistant", Content: "It is 18 °C and cloudy in Paris."})
	}
	return msgs, Options{Tools: []json.RawMessage{tool, tool}, AddGenerationPrompt: true}
}

func BenchmarkRender(b *testing.B) {
	msgs, opt := benchConversation()
	out, _ := Render(msgs, opt)
	b.SetBytes(int64(len(out)))
	for b.Loop() {
		if _, err := Render(msgs, opt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseToolCalls(b *testing.B) {
	text := `<|python_tag|>{"name": "get_current_weather", "parameters": {"city": "Paris", "unit": "celsius", "days": [1, 2, 3]}}`
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, ok := ParseToolCalls(text); !ok {
			b.Fatal("not parsed")
		}
	}
}

// benchQwen3 is a 20-turn conversation (10 user turns, each answered by a
// tool call, its result and a reply with reasoning) with 10 tools.
func benchQwen3() ([]Message, Options) {
	msgs, _ := benchConversation()
	for i := range msgs {
		if msgs[i].Role == "assistant" && msgs[i].Content != "" {
			msgs[i].ReasoningContent = "The tool said 18 degrees and cloudy; answer briefly."
		}
	}
	tools := make([]json.RawMessage, 10)
	for i := range tools {
		tools[i] = json.RawMessage(`{"type":"function","function":{"name":"get_current_weather` + string(rune('a'+i)) + `","description":"Get the current weather for a city.","parameters":{"type":"object","properties":{"city":{"type":"string","description":"City name"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}}}`)
	}
	return msgs[:21], Options{Tools: tools, AddGenerationPrompt: true}
}

// BenchmarkRenderQwen3: the goal is ≤ 1 ms per rendering. cpu-ns/op is
// the process's CPU time per rendering (GC included), which a machine
// shared with other work does not inflate as it does ns/op.
func BenchmarkRenderQwen3(b *testing.B) {
	msgs, opt := benchQwen3()
	opt.Template = qwen3(b)
	out, err := Render(msgs, opt)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	start := cpuTime()
	for b.Loop() {
		if _, err := RenderSegments(msgs, opt); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRenderLlamaJinja is BenchmarkRender through the Jinja engine,
// to compare with the native renderer.
func BenchmarkRenderLlamaJinja(b *testing.B) {
	msgs, opt := benchConversation()
	opt.Template = loadCaseTemplate(b, "testdata/tokenizer/llama3.2/tokenizer_config.json")
	for b.Loop() {
		if _, err := RenderSegments(msgs, opt); err != nil {
			b.Fatal(err)
		}
	}
}
