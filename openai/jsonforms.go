package openai

import (
	"bytes"
	"encoding/json"
	"reflect"
)

// stringOrArray decodes b, a JSON string, array of T or null, for the
// UnmarshalJSON methods of fields OpenAI accepts in either form: a string
// sets str, an array sets arr (non-nil, also when empty), null sets neither.
// Any other value is a *json.UnmarshalTypeError of type t saying other (the
// decoder adds the field path).
func stringOrArray[T any](b []byte, t reflect.Type, other string) (str *string, arr []T, err error) {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil, nil, nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, nil, err
		}
		return &s, nil, nil
	case len(b) > 0 && b[0] == '[':
		if err := json.Unmarshal(b, &arr); err != nil {
			return nil, nil, err
		}
		if arr == nil {
			arr = []T{}
		}
		return nil, arr, nil
	}
	return nil, nil, &json.UnmarshalTypeError{Value: other, Type: t}
}
