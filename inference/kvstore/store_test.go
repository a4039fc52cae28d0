package kvstore

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/inference"
)

const rowBytes = 16

var layout = inference.KVLayout{Identity: "test-model", RowBytes: rowBytes}

// row is the fake KV row of token tok at position pos.
func row(pos int, tok int32) []byte {
	b := make([]byte, rowBytes)
	binary.LittleEndian.PutUint64(b, uint64(pos))
	binary.LittleEndian.PutUint64(b[8:], uint64(tok))
	return b
}

// model is a fake resident cache: it records what it was given.
type model struct {
	seq  []int32 // the sequence whose rows get serves
	rows map[int][]byte
	gets [][2]int
}

func (m *model) get(from, to int, dst []byte) error {
	m.gets = append(m.gets, [2]int{from, to})
	for p := from; p < to; p++ {
		copy(dst[(p-from)*rowBytes:], row(p, m.seq[p]))
	}
	return nil
}

func (m *model) put(pos int, rows []byte) error {
	if m.rows == nil {
		m.rows = map[int][]byte{}
	}
	for i := 0; i*rowBytes < len(rows); i++ {
		m.rows[pos+i] = append([]byte(nil), rows[i*rowBytes:(i+1)*rowBytes]...)
	}
	return nil
}

func save(t *testing.T, s *Store, owner, tag string, seq []int32) *model {
	t.Helper()
	m := &model{seq: seq}
	if err := s.Save(owner, tag, seq, m.get); err != nil {
		t.Fatal(err)
	}
	return m
}

// restore restores seq from from and checks every row it was given.
func restore(t *testing.T, s *Store, owner string, seq []int32, from int) int {
	t.Helper()
	m := &model{}
	n, err := s.Restore(owner, seq, from, m.put)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(m.rows), max(n-from, 0); got != want {
		t.Fatalf("restore gave %d rows, want %d", got, want)
	}
	for p, b := range m.rows {
		if p < from || p >= n || string(b) != string(row(p, seq[p])) {
			t.Fatalf("row %d restored wrong (from %d, n %d)", p, from, n)
		}
	}
	return n
}

func seqOf(prefix []int32, rest ...int32) []int32 {
	return append(append([]int32(nil), prefix...), rest...)
}

func count(n int, base int32) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = base + int32(i)
	}
	return s
}

func open(t *testing.T, memory int64, dir string) *Store {
	t.Helper()
	s, err := Open(Config{Layout: layout, Memory: memory, Dir: dir, Disk: 1 << 20, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLongestPrefixAndSharing(t *testing.T) {
	s := open(t, 1<<20, "")
	sys := count(100, 1000)
	a, b := seqOf(sys, 1, 2, 3), seqOf(sys, 7, 8)
	save(t, s, "", "", a)
	mb := save(t, s, "", "", b)
	if len(mb.gets) != 1 || mb.gets[0] != [2]int{100, 102} {
		t.Fatalf("second save read rows %v, want only [100, 102): the shared prefix is stored once", mb.gets)
	}
	st := s.Stats()
	if st.Entries != 2 || st.Bytes != int64(103+2)*rowBytes {
		t.Fatalf("stats %+v: want 2 entries, %d bytes", st, (103+2)*rowBytes)
	}
	tests := []struct {
		name string
		seq  []int32
		from int
		want int
	}{
		{"a continued", seqOf(a, 9, 9), 0, 103},
		{"b continued", seqOf(b, 5), 0, 102},
		{"b from the resident 50", seqOf(b, 5), 50, 102},
		{"only the system prompt", seqOf(sys, 42), 0, 100},
		{"part of the system prompt", seqOf(sys[:40], 42), 0, 40},
		{"nothing", []int32{5, 6}, 0, 0},
		{"resident is longer", seqOf(a, 1), 103, 103},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if n := restore(t, s, "", tc.seq, tc.from); n != tc.want {
				t.Fatalf("matched %d, want %d", n, tc.want)
			}
		})
	}
	// A sequence that ends inside a stored edge splits it; nothing new is read.
	mc := save(t, s, "", "", sys[:60])
	if len(mc.gets) != 0 || s.Stats().Bytes != int64(103+2)*rowBytes {
		t.Fatalf("saving a stored prefix read %v, stats %+v", mc.gets, s.Stats())
	}
	if n := restore(t, s, "", seqOf(a, 1), 0); n != 103 {
		t.Fatalf("after the split: matched %d, want 103", n)
	}
}

func TestOwnersAreIsolated(t *testing.T) {
	s := open(t, 1<<20, "")
	seq := count(50, 1)
	save(t, s, "alice", "", seq)
	if n := restore(t, s, "bob", seqOf(seq, 1), 0); n != 0 {
		t.Fatalf("bob matched %d of alice's rows", n)
	}
	if n := restore(t, s, "", seqOf(seq, 1), 0); n != 0 {
		t.Fatalf("the keyless owner matched %d of alice's rows", n)
	}
	if n := restore(t, s, "alice", seqOf(seq, 1), 0); n != 50 {
		t.Fatalf("alice matched %d, want 50", n)
	}
}

func TestBudgetUnderFlood(t *testing.T) {
	const budget = 64 * 1024
	s := open(t, budget, "")
	rng := rand.New(rand.NewPCG(1, 2))
	sys := count(30, 5000)
	for i := range 2000 {
		n := 1 + rng.IntN(300)
		seq := make([]int32, n)
		for j := range seq {
			seq[j] = rng.Int32N(1000)
		}
		if i%3 == 0 {
			seq = seqOf(sys, seq...)
		}
		save(t, s, fmt.Sprint("owner", i%4), "", seq)
		st := s.Stats()
		if st.Bytes > budget || st.Bytes < 0 {
			t.Fatalf("after %d saves: %d bytes, budget %d", i+1, st.Bytes, budget)
		}
		if got := s.heldBytes(); got != st.Bytes || s.leaves() != st.Entries {
			t.Fatalf("after %d saves: counted %d bytes/%d entries, the tree holds %d/%d", i+1, st.Bytes, st.Entries, got, s.leaves())
		}
		var owned int64
		for _, b := range s.owned {
			owned += b
		}
		if owned != st.Bytes {
			t.Fatalf("after %d saves: the owners' bytes add up to %d, the store holds %d", i+1, owned, st.Bytes)
		}
	}
	if st := s.Stats(); st.Evictions == 0 || st.Entries == 0 {
		t.Fatalf("stats %+v: want evictions and entries", st)
	}
	// The newest entry survives.
	last := count(200, 1)
	save(t, s, "x", "", last)
	if n := restore(t, s, "x", seqOf(last, 0), 0); n != 200 {
		t.Fatalf("newest entry matched %d, want 200", n)
	}
	// A sequence larger than the whole budget is not saved.
	save(t, s, "x", "", count(budget/rowBytes+1, 1))
	if st := s.Stats(); st.Bytes > budget {
		t.Fatalf("%d bytes over budget %d", st.Bytes, budget)
	}
}

func TestLRUKeepsRecentlyUsed(t *testing.T) {
	s := open(t, 3*10*rowBytes, "") // three 10-token entries
	a, b, c, d := count(10, 100), count(10, 200), count(10, 300), count(10, 400)
	save(t, s, "", "", a)
	save(t, s, "", "", b)
	save(t, s, "", "", c)
	restore(t, s, "", seqOf(a, 1), 0) // a is now the most recent
	save(t, s, "", "", d)             // evicts b
	for _, tc := range []struct {
		seq  []int32
		want int
	}{{a, 10}, {b, 0}, {c, 10}, {d, 10}} {
		if n := restore(t, s, "", seqOf(tc.seq, 1), 0); n != tc.want {
			t.Fatalf("seq %d…: matched %d, want %d", tc.seq[0], n, tc.want)
		}
	}
}

// TestEvictionSparesLightOwners: past the budget the owner holding the most
// rows loses its least recently used entry, so a key saving many
// conversations evicts its own and not another key's; an entry just saved
// goes only when it is all the store holds.
func TestEvictionSparesLightOwners(t *testing.T) {
	s := open(t, 4*10*rowBytes, "") // four 10-token entries
	alice := count(10, 100)
	save(t, s, "alice", "", alice)
	var bobs [][]int32
	for i := range 6 {
		b := count(10, int32(1000+100*i))
		bobs = append(bobs, b)
		save(t, s, "bob", "", b)
	}
	if n := restore(t, s, "alice", seqOf(alice, 1), 0); n != 10 {
		t.Errorf("alice's entry matched %d, want 10: bob's saves evicted it", n)
	}
	for i, b := range bobs {
		want := 0
		if i >= 3 { // bob keeps his three newest
			want = 10
		}
		if n := restore(t, s, "bob", seqOf(b, 1), 0); n != want {
			t.Errorf("bob's entry %d matched %d, want %d", i, n, want)
		}
	}
	// An entry larger than everything else held stays; the others go.
	big := count(35, 5000)
	save(t, s, "carol", "", big)
	if n := restore(t, s, "carol", seqOf(big, 1), 0); n != 35 {
		t.Errorf("carol's entry matched %d, want 35", n)
	}
	if st := s.Stats(); st.Bytes > 4*10*rowBytes {
		t.Errorf("%d bytes over the budget", st.Bytes)
	}
}

func TestTagReplacesBranch(t *testing.T) {
	s := open(t, 1<<20, "")
	hist := count(40, 1)
	save(t, s, "", "conv1", seqOf(hist, 10, 11))
	save(t, s, "", "conv1", seqOf(hist, 20, 21, 22)) // a regenerated reply
	if n := restore(t, s, "", seqOf(hist, 10, 11, 0), 0); n != 40 {
		t.Fatalf("the replaced branch matched %d, want 40 (the shared history only)", n)
	}
	if n := restore(t, s, "", seqOf(hist, 20, 21, 22, 0), 0); n != 43 {
		t.Fatalf("the new branch matched %d, want 43", n)
	}
	// Without a tag, or with another, branches are kept.
	save(t, s, "", "conv2", seqOf(hist, 30))
	save(t, s, "", "", seqOf(hist, 31))
	if st := s.Stats(); st.Entries != 3 {
		t.Fatalf("%d entries, want 3", st.Entries)
	}
	// A turn extending the tagged entry keeps one entry.
	save(t, s, "", "conv1", seqOf(hist, 20, 21, 22, 23, 24))
	if st := s.Stats(); st.Entries != 3 {
		t.Fatalf("%d entries after extending, want 3", st.Entries)
	}
}

func TestDiskSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s := open(t, 1<<20, dir)
	a, b := count(80, 1), count(30, 500)
	save(t, s, "alice", "k", a)
	save(t, s, "", "", b)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, 1<<20, dir)
	if st := s.Stats(); st.DiskEntries != 2 || st.Entries != 0 {
		t.Fatalf("after restart: %+v, want 2 disk entries", st)
	}
	if n := restore(t, s, "bob", seqOf(a, 1), 0); n != 0 {
		t.Fatalf("bob restored %d of alice's rows from disk", n)
	}
	if n := restore(t, s, "alice", seqOf(a, 1), 0); n != 80 {
		t.Fatalf("alice restored %d, want 80", n)
	}
	if n := restore(t, s, "", seqOf(b[:20], 1), 0); n != 20 {
		t.Fatalf("restored %d of the keyless entry, want 20", n)
	}
	if st := s.Stats(); st.Entries != 2 || st.DiskEntries != 0 {
		t.Fatalf("after loading: %+v, want both in memory", st)
	}
}

func TestDiskSpillOnEviction(t *testing.T) {
	dir := t.TempDir()
	s := open(t, 20*rowBytes, dir)
	a, b := count(15, 1), count(15, 100)
	save(t, s, "", "", a)
	save(t, s, "", "", b) // a spills
	if st := s.Stats(); st.Entries != 1 || st.DiskEntries != 1 || st.Evictions != 1 {
		t.Fatalf("stats %+v: want one in memory, one on disk", st)
	}
	if n := restore(t, s, "", seqOf(a, 0), 0); n != 15 {
		t.Fatalf("a from disk: matched %d, want 15", n)
	}
}

func TestDiskRefusesForeignAndCorrupted(t *testing.T) {
	tests := []struct {
		name   string
		layout inference.KVLayout
		spoil  func(t *testing.T, path string)
	}{
		{"another model", inference.KVLayout{Identity: "other-model", RowBytes: rowBytes}, nil},
		{"another row size", inference.KVLayout{Identity: "test-model", RowBytes: 2 * rowBytes}, nil},
		{"a flipped row byte", layout, func(t *testing.T, p string) {
			b, _ := os.ReadFile(p)
			b[len(b)-10] ^= 1
			os.WriteFile(p, b, 0o600)
		}},
		{"truncated", layout, func(t *testing.T, p string) {
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-3], 0o600)
		}},
		{"renamed", layout, func(t *testing.T, p string) {
			os.Rename(p, filepath.Join(filepath.Dir(p), "00000000000000000000000000000000.kv"))
		}},
		{"not a snapshot", layout, func(t *testing.T, p string) { os.WriteFile(p, []byte("hello"), 0o600) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, file, seq := savedOne(t, tc.layout)
			if tc.spoil != nil {
				tc.spoil(t, file)
			}
			s := open(t, 1<<20, dir)
			if n := restore(t, s, "", seqOf(seq, 1), 0); n != 0 {
				t.Fatalf("restored %d rows from a refused file", n)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
				t.Fatalf("refused file kept: %v", left)
			}
		})
	}
}

// savedOne saves one sequence through a store with layout in a new
// directory and returns the directory, the one file written and the
// sequence.
func savedOne(t *testing.T, layout inference.KVLayout) (dir, file string, seq []int32) {
	t.Helper()
	dir = t.TempDir()
	w, err := Open(Config{Layout: layout, Memory: 1 << 20, Dir: dir, Disk: 1 << 20, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	seq = count(20, 1)
	save(t, w, "", "", seq)
	w.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "*.kv"))
	if len(files) != 1 {
		t.Fatalf("%d files written", len(files))
	}
	return dir, files[0], seq
}

func TestDiskBudget(t *testing.T) {
	dir := t.TempDir()
	const disk = 4096
	s, err := Open(Config{Layout: layout, Memory: 10 * rowBytes, Dir: dir, Disk: disk, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		save(t, s, "", "", count(8, int32(i*100)))
		var total int64
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, f := range files {
			info, _ := os.Stat(f)
			total += info.Size()
		}
		if total > disk || total != s.Stats().DiskBytes {
			t.Fatalf("after %d saves: %d bytes on disk (index says %d), budget %d", i+1, total, s.Stats().DiskBytes, disk)
		}
	}
}

// TestDiskEvictionSparesLightOwners: past the disk budget the owner whose
// files hold the most bytes loses its oldest, so a key spilling many
// conversations removes its own files and not another key's.
func TestDiskEvictionSparesLightOwners(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Layout: layout, Memory: 10 * rowBytes, Dir: dir, Disk: 4096, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	alice := count(8, 7000)
	save(t, s, "alice", "", alice)
	var last []int32
	for i := range 50 {
		last = count(8, int32(i*100))
		save(t, s, "bob", "", last) // each spills the one before to disk
	}
	if st := s.Stats(); st.DiskBytes > 4096 {
		t.Fatalf("%d bytes on disk, budget 4096", st.DiskBytes)
	}
	if n := restore(t, s, "alice", seqOf(alice, 1), 0); n != 8 {
		t.Errorf("alice's entry matched %d, want 8: bob's spills removed it", n)
	}
	if n := restore(t, s, "bob", seqOf(count(8, 0), 1), 0); n != 0 {
		t.Errorf("bob's oldest entry matched %d, want 0 (removed)", n)
	}
	if n := restore(t, s, "bob", seqOf(last, 1), 0); n != 8 {
		t.Errorf("bob's newest entry matched %d, want 8", n)
	}
}

// heldBytes and leaves recount the tree.
func (s *Store) heldBytes() int64 {
	var n int64
	var walk func(*node)
	walk = func(nd *node) {
		n += int64(len(nd.rows))
		for _, k := range nd.kids {
			walk(k)
		}
	}
	for _, r := range s.roots {
		walk(r)
	}
	return n
}

func (s *Store) leaves() int {
	n := 0
	var walk func(*node)
	walk = func(nd *node) {
		if len(nd.kids) == 0 && nd.parent != nil {
			n++
		}
		for _, k := range nd.kids {
			walk(k)
		}
	}
	for _, r := range s.roots {
		walk(r)
	}
	return n
}
