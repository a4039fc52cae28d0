package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// A tiny JSON-schema-like checker for the OpenAI shapes clients rely on.
// A spec is a string of "|"-separated types (string, integer, number,
// boolean, null, object, array) or "=value" for a constant string; a
// map[string]any for an object whose keys are required unless they end in
// "?"; or []any{elem} for an array of elem.
type spec = any

var (
	usageSpec = map[string]any{
		"prompt_tokens": "integer", "completion_tokens": "integer", "total_tokens": "integer",
		"prompt_tokens_details":     map[string]any{"cached_tokens": "integer"},
		"completion_tokens_details": map[string]any{"reasoning_tokens": "integer"},
	}
	timingsSpec = map[string]any{"prompt_n": "integer", "prompt_ms": "number", "predicted_n": "integer",
		"predicted_ms": "number", "predicted_per_second": "number", "cache_n": "integer"}
	topLogprobSpec  = map[string]any{"token": "string", "logprob": "number", "bytes": []any{"integer"}}
	chatLogprobSpec = map[string]any{"content": []any{map[string]any{"token": "string", "logprob": "number",
		"bytes": []any{"integer"}, "top_logprobs": []any{topLogprobSpec}}}}
	toolCallSpec = map[string]any{"id": "string", "type": "=function",
		"function": map[string]any{"name": "string", "arguments": "string"}}
	chatCompletionSpec = map[string]any{
		"id": "string", "object": "=chat.completion", "created": "integer", "model": "string",
		"system_fingerprint": "string",
		"choices": []any{map[string]any{"index": "integer", "finish_reason": "string", "logprobs?": "null|object",
			"message": map[string]any{"role": "=assistant", "content": "string|null", "refusal?": "null|string",
				"tool_calls?": []any{toolCallSpec}}}},
		"usage": usageSpec, "timings?": timingsSpec,
	}
	chatChunkSpec = map[string]any{
		"id": "string", "object": "=chat.completion.chunk", "created": "integer", "model": "string",
		"system_fingerprint": "string",
		"choices": []any{map[string]any{"index": "integer", "finish_reason": "string|null", "logprobs?": "null|object",
			"delta": map[string]any{"role?": "=assistant", "content?": "string|null",
				"tool_calls?": []any{map[string]any{"index": "integer", "id?": "string", "type?": "=function",
					"function": map[string]any{"name?": "string", "arguments?": "string"}}}}}},
		"usage?": "null|object", "timings?": timingsSpec,
	}
	completionSpec = map[string]any{
		"id": "string", "object": "=text_completion", "created": "integer", "model": "string",
		"system_fingerprint": "string",
		"choices": []any{map[string]any{"index": "integer", "text": "string", "finish_reason": "string|null",
			"logprobs": "null|object"}},
		"usage?": "null|object", "timings?": timingsSpec,
	}
)

// checkShape fails t when the JSON doc does not match sp.
func checkShape(t *testing.T, doc []byte, sp spec) {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, doc)
	}
	if err := matchSpec("$", v, sp); err != nil {
		t.Fatalf("shape: %v in %s", err, doc)
	}
}

func matchSpec(path string, v any, sp spec) error {
	switch sp := sp.(type) {
	case map[string]any:
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object, got %T", path, v)
		}
		for k, sub := range sp {
			name, optional := strings.CutSuffix(k, "?")
			x, present := obj[name]
			if !present {
				if optional {
					continue
				}
				return fmt.Errorf("%s.%s: missing", path, name)
			}
			if err := matchSpec(path+"."+name, x, sub); err != nil {
				return err
			}
		}
		return nil
	case []any:
		arr, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: want an array, got %T", path, v)
		}
		for i, x := range arr {
			if err := matchSpec(fmt.Sprintf("%s[%d]", path, i), x, sp[0]); err != nil {
				return err
			}
		}
		return nil
	case string:
		if c, ok := strings.CutPrefix(sp, "="); ok {
			if v != c {
				return fmt.Errorf("%s: want %q, got %v", path, c, v)
			}
			return nil
		}
		if slices.Contains(strings.Split(sp, "|"), jsonType(v)) ||
			jsonType(v) == "integer" && strings.Contains(sp, "number") {
			return nil
		}
		return fmt.Errorf("%s: want %s, got %s (%v)", path, sp, jsonType(v), v)
	}
	return fmt.Errorf("%s: bad spec %T", path, sp)
}

func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "?"
}

func TestCheckShape(t *testing.T) {
	sp := map[string]any{"a": "integer", "b?": "string|null", "c": []any{map[string]any{"d": "=x"}}}
	for doc, ok := range map[string]bool{
		`{"a":1,"c":[]}`:                   true,
		`{"a":1,"b":null,"c":[{"d":"x"}]}`: true,
		`{"a":1.5,"c":[]}`:                 false,
		`{"c":[]}`:                         false,
		`{"a":1,"c":[{"d":"y"}]}`:          false,
		`{"a":1,"b":2,"c":[]}`:             false,
	} {
		var v any
		_ = json.Unmarshal([]byte(doc), &v)
		if err := matchSpec("$", v, sp); (err == nil) != ok {
			t.Errorf("%s: err %v, want ok=%v", doc, err, ok)
		}
	}
}
