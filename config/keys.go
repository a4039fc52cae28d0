package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ByteSize is a size in bytes. In YAML it is an integer or a string with a
// unit: "512KiB", "1MiB", "2MB", "1GiB".
type ByteSize int64

// UnmarshalYAML accepts an integer or an integer with a unit.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseByteSize(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: %q is not a size like 1048576 or \"1MiB\"", n.Line, n.Value)
	}
	*b = v
	return nil
}

// ParseByteSize parses "1048576", "1MiB", "512KiB", "2MB" and the like.
func ParseByteSize(s string) (ByteSize, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mul    int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	mul := int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mul = strings.TrimSpace(rest), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, err
	}
	return ByteSize(n * mul), nil
}

// checkKeys walks the YAML tree against the struct behind v and reports the
// first unknown key with its full dotted path, which the decoder's own
// KnownFields error does not give.
func checkKeys(root *yaml.Node, v any) error {
	if root.Kind == 0 || len(root.Content) == 0 { // empty document
		return nil
	}
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	return walkKeys(n, reflect.TypeOf(v).Elem(), "")
}

func walkKeys(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct && n.Kind == yaml.SequenceNode {
		for i, el := range n.Content { // a list of sections (models:): each entry's keys, named with its index
			if err := walkKeys(el, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if t.Kind() != reflect.Struct || n.Kind != yaml.MappingNode {
		// A leaf: decode it alone so a type error names its key.
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			msg := strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n  ")
			if path == "" {
				return fmt.Errorf("config: %s", msg)
			}
			return fmt.Errorf("config: %s: %s", path, msg)
		}
		return nil
	}
	fields := make(map[string]reflect.Type)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			fields[name] = f.Type
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key := k.Value
		if path != "" {
			key = path + "." + k.Value
		}
		ft, ok := fields[k.Value]
		if !ok {
			return fmt.Errorf("config: %s: unknown key (line %d)", key, k.Line)
		}
		if err := walkKeys(val, ft, key); err != nil {
			return err
		}
	}
	return nil
}
