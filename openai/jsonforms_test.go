package openai

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func TestStringOrArray(t *testing.T) {
	typ := reflect.TypeFor[Stop]()
	for _, tc := range []struct {
		in      string
		str     *string
		arr     []int
		typeErr bool
	}{
		{in: `null`},
		{in: ` "hi" `, str: ptr("hi")},
		{in: `[]`, arr: []int{}},
		{in: `[1,2]`, arr: []int{1, 2}},
		{in: `7`, typeErr: true},
		{in: `{}`, typeErr: true},
	} {
		str, arr, err := stringOrArray[int]([]byte(tc.in), typ, "other")
		var te *json.UnmarshalTypeError
		if tc.typeErr {
			if !errors.As(err, &te) || te.Value != "other" || te.Type != typ {
				t.Errorf("%s: err %v, want the type error", tc.in, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(str, tc.str) || !reflect.DeepEqual(arr, tc.arr) || (tc.arr != nil) != (arr != nil) {
			t.Errorf("%s: got %v %#v %v, want %v %#v", tc.in, str, arr, err, tc.str, tc.arr)
		}
	}
}
