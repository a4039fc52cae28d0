// Package endtokens resolves the tokens that end a model's turn, by one rule
// for every model format: the union of the model's own list (a Genie
// bundle's dialog.context.eos-token, a manifest's eos_token_ids, an
// export's) and generation_config.json's eos_token_id (one id or a list);
// where neither has any, tokenizer_config.json's eos_token. A model with
// none is refused: it would never end a turn.
package endtokens

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hexserve/hexserve/internal/modelfile"
)

// Vocab is what Resolve needs of the tokenizer.
type Vocab interface {
	VocabSize() int
	TokenID(s string) (int32, bool)
}

// Set is the resolved end tokens and where they came from, for the log.
type Set struct {
	IDs     []int32
	Sources []string
}

// Resolve applies the rule to own, the model's list (named ownField in
// errors), and the files in dirs (the model's folder, the tokenizer's; the
// first folder holding a file is used). Every id must be in vocab.
func Resolve(own []int32, ownField string, dirs []string, vocab Vocab) (Set, error) {
	var s Set
	add := func(source string, ids ...int32) error {
		for _, id := range ids {
			if id < 0 || int(id) >= vocab.VocabSize() {
				return fmt.Errorf("%s: end token %d is outside the tokenizer's %d tokens", source, id, vocab.VocabSize())
			}
			if !slices.Contains(s.IDs, id) {
				s.IDs = append(s.IDs, id)
			}
		}
		if len(ids) > 0 {
			s.Sources = append(s.Sources, source)
		}
		return nil
	}
	if err := add(ownField, own...); err != nil {
		return Set{}, err
	}
	var gen struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	path, err := readFirst(dirs, "generation_config.json", &gen)
	if err != nil {
		return Set{}, err
	}
	if path != "" {
		ids, err := oneOrMany(gen.EOS)
		if err != nil {
			return Set{}, fmt.Errorf("%s: eos_token_id: %w", path, err)
		}
		if err := add(path+" eos_token_id", ids...); err != nil {
			return Set{}, err
		}
	}
	if len(s.IDs) == 0 {
		if err := fromTokenizerConfig(dirs, vocab, add); err != nil {
			return Set{}, err
		}
	}
	if len(s.IDs) == 0 {
		return Set{}, fmt.Errorf("no end tokens: %s is empty or missing, and there is no generation_config.json eos_token_id nor tokenizer_config.json eos_token (in %s): the model would never end a turn",
			ownField, strings.Join(dirs, ", "))
	}
	return s, nil
}

// fromTokenizerConfig adds tokenizer_config.json's eos_token: a string or
// an added-token object with its content.
func fromTokenizerConfig(dirs []string, vocab Vocab, add func(string, ...int32) error) error {
	var tc struct {
		EOS json.RawMessage `json:"eos_token"`
	}
	path, err := readFirst(dirs, "tokenizer_config.json", &tc)
	if path == "" || err != nil || len(tc.EOS) == 0 || string(tc.EOS) == "null" {
		return err
	}
	var text string
	if json.Unmarshal(tc.EOS, &text) != nil {
		var obj struct {
			Content string `json:"content"`
		}
		if json.Unmarshal(tc.EOS, &obj) != nil {
			return fmt.Errorf("%s: eos_token: want a string or an object with content", path)
		}
		text = obj.Content
	}
	id, ok := vocab.TokenID(text)
	if !ok {
		return fmt.Errorf("%s: eos_token: %q is not a token of the tokenizer", path, text)
	}
	return add(path+" eos_token", id)
}

// readFirst decodes the first dirs/name into v and returns its path; ""
// when no folder holds one.
func readFirst(dirs []string, name string, v any) (string, error) {
	for _, d := range dirs {
		p := filepath.Join(d, name)
		err := modelfile.ReadJSON(p, v)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		return p, err
	}
	return "", nil
}

// oneOrMany decodes a token id or a list of them (absent or null: none).
func oneOrMany(raw json.RawMessage) ([]int32, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one int32
	if json.Unmarshal(raw, &one) == nil {
		return []int32{one}, nil
	}
	var many []int32
	if json.Unmarshal(raw, &many) != nil {
		return nil, errors.New("want a token id or a list of them")
	}
	return many, nil
}
