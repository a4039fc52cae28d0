package jsonkind

import (
	"reflect"
	"testing"
)

func TestWant(t *testing.T) {
	for _, tt := range []struct {
		v    any
		want string
	}{
		{struct{}{}, "an object"}, {map[string]int{}, "an object"}, {[]int{}, "an array"}, {[2]int{}, "an array"},
		{"", "a string"}, {true, "a boolean"}, {int32(0), "an integer"}, {uint(0), "a non-negative integer"},
		{0.5, "a number"}, {new(*int), "an integer"}, {nil, "a value"},
	} {
		if got := Want(reflect.TypeOf(tt.v)); got != tt.want {
			t.Errorf("Want(%T) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestGot(t *testing.T) {
	for in, want := range map[string]string{"number": "a number", "string": "a string", "bool": "a boolean", "array": "an array",
		"object": "an object", "number 1.5": "the number 1.5", "number -1": "the number -1", "a value other than x": "a value other than x"} {
		if got := Got(in); got != want {
			t.Errorf("Got(%q) = %q, want %q", in, got, want)
		}
	}
}
