package modelfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
)

// DecodeJSON decodes data, one JSON value and nothing after it but
// whitespace, into v. Its errors speak JSON, not Go: the field, what the
// file has there and what is wanted ("dialog.context: got an array, want an
// object"), never a Go type name.
func DecodeJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("bytes after the JSON value at offset %d: a file holds one JSON value", dec.InputOffset())
	}
	return nil
}

// ReadJSON reads path, a JSON config of at most MaxConfig bytes, into v
// (see DecodeJSON); errors name the file.
func ReadJSON(path string, v any) error {
	data, err := ReadFile(path, MaxConfig)
	if err != nil {
		return err
	}
	if err := DecodeJSON(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// jsonError rewords encoding/json's errors.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "the top level"
		}
		return fmt.Errorf("%s: got %s, want %s", field, article(te.Value), jsonKind(te.Type))
	case errors.As(err, &se):
		return fmt.Errorf("not valid JSON at offset %d: %s", se.Offset, se.Error())
	case errors.Is(err, io.EOF):
		return errors.New("empty: want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("not valid JSON: the file ends in the middle of a value")
	}
	return errors.New("not valid JSON")
}

// article puts "a"/"an" before encoding/json's value words ("number 1e400"
// stays as it is).
func article(v string) string {
	switch v {
	case "array", "object":
		return "an " + v
	case "string", "bool":
		return "a " + v
	case "number":
		return "a number"
	}
	return v
}

// jsonKind names what JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another kind of value"
}
