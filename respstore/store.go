// Package respstore keeps stored Responses API responses: opaque documents
// within count and bytes limits, each owned by the API key hash that created
// it, optionally persisted one file per entry in a directory so they survive
// a restart. Past a limit the owner holding the most gives up its least
// recently used entry: one key storing many responses evicts its own, not
// another key's.
package respstore

import (
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hexserve/hexserve/internal/modelfile"
	"github.com/rs/zerolog"
)

// Options bound a Store.
type Options struct {
	MaxCount int    // entries kept; <= 0 means DefaultMaxCount
	MaxBytes int64  // total document bytes kept; <= 0 means DefaultMaxBytes
	Dir      string // "": memory only
	// Validate checks each document loaded from Dir as if a client had sent
	// it (nil: any JSON); a refused file is skipped with a log line.
	Validate func(id string, data []byte) error
	// Logger receives the lines about refused files.
	Logger zerolog.Logger
}

// Defaults for Options left at zero.
const (
	DefaultMaxCount = 1000
	DefaultMaxBytes = 64 << 20
)

// ErrTooLarge reports a document larger than the whole store.
var ErrTooLarge = errors.New("respstore: document larger than the store's byte limit")

// Store is safe for concurrent use.
type Store struct {
	opts   Options
	mu     sync.Mutex
	owners map[string]*owned
	byID   map[string]*list.Element
	count  int
	bytes  int64
}

// owned is one owner's entries, least recently used last.
type owned struct {
	lru   *list.List // front: most recently used; values are *entry
	bytes int64
}

type entry struct {
	ID    string          `json:"id"`
	Owner string          `json:"owner"`
	Data  json.RawMessage `json:"data"`
}

// Open returns a store; with a Dir it creates the directory and loads the
// entries found there, most recently used first (by modification time)
// while they fit the limits.
func Open(o Options) (*Store, error) {
	if o.MaxCount <= 0 {
		o.MaxCount = DefaultMaxCount
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	s := &Store{opts: o, owners: make(map[string]*owned), byID: make(map[string]*list.Element)}
	if o.Dir == "" {
		return s, nil
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("respstore: %w", err)
	}
	all, err := load(o)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(all) - 1; i >= 0; i-- { // oldest first: the newest end up in front
		s.insert(all[i])
	}
	return s, nil
}

// fileOverhead bounds what a file holds beyond its document (id, owner).
const fileOverhead = 4 << 10

// load reads the entries of o.Dir, newest first, while they fit the
// limits: only regular files named after a valid id, each read no further
// than the byte limit, each document validated. Entries beyond the limits
// (the least recently used) are removed, as eviction would.
func load(o Options) ([]*entry, error) {
	ents, err := os.ReadDir(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("respstore: %w", err)
	}
	type found struct {
		name string
		info fs.FileInfo
	}
	var files []found
	refuse := func(name string, err error) {
		o.Logger.Warn().Err(err).Str("file", filepath.Join(o.Dir, name)).Msg("respstore: refusing a stored response")
	}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") || !ValidID(strings.TrimSuffix(name, ".json")) {
			continue // not a stored response (temporary files start with '.')
		}
		info, err := modelfile.StatIn(o.Dir, name)
		if err != nil {
			refuse(name, err)
			continue
		}
		files = append(files, found{name, info})
	}
	slices.SortFunc(files, func(a, b found) int { return b.info.ModTime().Compare(a.info.ModTime()) })
	var out []*entry
	var total int64
	dropped := 0
	for _, f := range files {
		if len(out) >= o.MaxCount || total+f.info.Size()-fileOverhead > o.MaxBytes {
			os.Remove(filepath.Join(o.Dir, f.name))
			dropped++
			continue
		}
		b, _, err := modelfile.ReadFileIn(o.Dir, f.name, min(o.MaxBytes-total, o.MaxBytes)+fileOverhead)
		if err != nil {
			refuse(f.name, err)
			continue
		}
		var e entry
		if err := json.Unmarshal(b, &e); err != nil {
			refuse(f.name, err)
			continue
		}
		switch {
		case e.ID+".json" != f.name:
			err = fmt.Errorf("it holds id %q", e.ID)
		case int64(len(e.Data)) > o.MaxBytes-total:
			err = errors.New("over max_bytes")
		case o.Validate != nil:
			err = o.Validate(e.ID, e.Data)
		}
		if err != nil {
			refuse(f.name, err)
			continue
		}
		total += int64(len(e.Data))
		out = append(out, &e)
	}
	if dropped > 0 {
		o.Logger.Info().Int("files", dropped).Str("dir", o.Dir).Msg("respstore: dropped the least recently used stored responses beyond max_count/max_bytes")
	}
	return out, nil
}

// ValidID reports whether id can name an entry (letters, digits, '_', '-').
func ValidID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	return strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == ""
}

// Put stores data under id for owner, evicting least recently used entries
// to stay within the limits.
func (s *Store) Put(id, owner string, data []byte) error {
	if !ValidID(id) {
		return fmt.Errorf("respstore: invalid id %q", id)
	}
	if int64(len(data)) > s.opts.MaxBytes {
		return ErrTooLarge
	}
	e := &entry{ID: id, Owner: owner, Data: slices.Clone(data)}
	if s.opts.Dir != "" {
		if err := s.write(e); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.byID[id]; ok {
		s.remove(el, false)
	}
	s.insert(e)
	return nil
}

// Get returns the document stored under id when owner created it.
func (s *Store) Get(id, owner string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.byID[id]
	if !ok || el.Value.(*entry).Owner != owner {
		return nil, false
	}
	s.owners[owner].lru.MoveToFront(el)
	if s.opts.Dir != "" {
		now := time.Now()
		_ = os.Chtimes(s.path(id), now, now) // keeps the LRU order across restarts
	}
	return el.Value.(*entry).Data, true
}

// Delete removes id when owner created it and reports whether it did.
func (s *Store) Delete(id, owner string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.byID[id]
	if !ok || el.Value.(*entry).Owner != owner {
		return false
	}
	s.remove(el, true)
	return true
}

// Len returns the number of entries and their total bytes.
func (s *Store) Len() (count int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count, s.bytes
}

// insert adds e as its owner's most recently used entry, then evicts while
// over a limit; s.mu is held.
func (s *Store) insert(e *entry) {
	o := s.owners[e.Owner]
	if o == nil {
		o = &owned{lru: list.New()}
		s.owners[e.Owner] = o
	}
	s.byID[e.ID] = o.lru.PushFront(e)
	o.bytes += int64(len(e.Data))
	s.count++
	s.bytes += int64(len(e.Data))
	for s.count > s.opts.MaxCount || s.bytes > s.opts.MaxBytes {
		s.remove(s.heaviest(s.count > s.opts.MaxCount).lru.Back(), true)
	}
}

// heaviest is the owner with the most entries (byCount) or bytes, the
// first by owner hash among equals; s.mu is held and there is one.
func (s *Store) heaviest(byCount bool) *owned {
	weight := func(o *owned) int64 {
		if byCount {
			return int64(o.lru.Len())
		}
		return o.bytes
	}
	var top *owned
	topName := ""
	for name, o := range s.owners {
		if top == nil || weight(o) > weight(top) || weight(o) == weight(top) && name < topName {
			top, topName = o, name
		}
	}
	return top
}

// remove drops el, and its file when unlink; s.mu is held.
func (s *Store) remove(el *list.Element, unlink bool) {
	e := el.Value.(*entry)
	o := s.owners[e.Owner]
	o.lru.Remove(el)
	o.bytes -= int64(len(e.Data))
	if o.lru.Len() == 0 {
		delete(s.owners, e.Owner)
	}
	delete(s.byID, e.ID)
	s.count--
	s.bytes -= int64(len(e.Data))
	if unlink && s.opts.Dir != "" {
		_ = os.Remove(s.path(e.ID))
	}
}

func (s *Store) path(id string) string { return filepath.Join(s.opts.Dir, id+".json") }

// write persists e atomically (temporary file, then rename).
func (s *Store) write(e *entry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.opts.Dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("respstore: %w", err)
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.path(e.ID))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("respstore: %w", err)
	}
	return nil
}
