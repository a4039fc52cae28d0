// Package jsonkind words JSON's kinds of value for error messages, one wording for the API's
// 400s and for the model files' errors: what a field wants (Want, from the Go type it decodes
// into) and what was there (Got, from encoding/json's word), never a Go type name.
package jsonkind

import (
	"reflect"
	"strings"
)

// Want names the JSON value a Go type decodes from: "an object", "an array", "a string",
// "a boolean", "an integer", "a non-negative integer", "a number"; "a value" for anything
// (nil, an interface).
func Want(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a value"
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a value"
}

// Got words encoding/json's name of the value it found (json.UnmarshalTypeError.Value:
// "number", "string", "bool", "array", "object", "number 1.5"): "a number", "a boolean",
// "the number 1.5"; another word is returned as it is.
func Got(v string) string {
	switch v {
	case "number":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "array":
		return "an array"
	case "object":
		return "an object"
	}
	if n, ok := strings.CutPrefix(v, "number "); ok {
		return "the number " + n
	}
	return v
}
