package chat

import (
	"encoding/json"
	"strings"
	"testing"
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
