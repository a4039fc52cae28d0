package modelfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/hexserve/hexserve/internal/jsonkind"
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
		return fmt.Errorf("%s: got %s, want %s", field, jsonkind.Got(te.Value), jsonkind.Want(te.Type))
	case errors.As(err, &se):
		return fmt.Errorf("not valid JSON at offset %d: %s", se.Offset, se.Error())
	case errors.Is(err, io.EOF):
		return errors.New("empty: want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("not valid JSON: the file ends in the middle of a value")
	}
	return errors.New("not valid JSON")
}
