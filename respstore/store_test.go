package respstore

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hexserve/hexserve/internal/costtest"
)

func TestStoreLimitsAndOwners(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      Options
		puts      []string // ids, each with 10 bytes of data, owner "a"
		touch     string   // read after the puts but the last
		wantGone  []string
		wantThere []string
	}{
		{"count evicts the least recently used", Options{MaxCount: 2}, []string{"r1", "r2", "r3"}, "", []string{"r1"}, []string{"r2", "r3"}},
		{"a read refreshes", Options{MaxCount: 2}, []string{"r1", "r2", "r3"}, "r1", []string{"r2"}, []string{"r1", "r3"}},
		{"bytes evict", Options{MaxBytes: 25}, []string{"r1", "r2", "r3"}, "", []string{"r1"}, []string{"r2", "r3"}},
		{"within limits", Options{}, []string{"r1", "r2", "r3"}, "", nil, []string{"r1", "r2", "r3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for i, id := range tc.puts {
				if i == len(tc.puts)-1 && tc.touch != "" {
					if _, ok := s.Get(tc.touch, "a"); !ok {
						t.Fatalf("%s missing before eviction", tc.touch)
					}
				}
				if err := s.Put(id, "a", []byte(fmt.Sprintf("%-10s", id))); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range tc.wantGone {
				if _, ok := s.Get(id, "a"); ok {
					t.Errorf("%s still stored", id)
				}
			}
			for _, id := range tc.wantThere {
				if d, ok := s.Get(id, "a"); !ok || string(d) != fmt.Sprintf("%-10s", id) {
					t.Errorf("%s: %q %v", id, d, ok)
				}
			}
			if n, b := s.Len(); n != len(tc.wantThere) || b != int64(10*n) {
				t.Errorf("Len = %d, %d", n, b)
			}
		})
	}
}

func TestStoreOwnerScope(t *testing.T) {
	s, _ := Open(Options{})
	if err := s.Put("resp_1", "alice", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get("resp_1", "bob"); ok {
		t.Fatal("another owner read the entry")
	}
	if s.Delete("resp_1", "bob") {
		t.Fatal("another owner deleted the entry")
	}
	if !s.Delete("resp_1", "alice") {
		t.Fatal("the owner could not delete")
	}
	if _, ok := s.Get("resp_1", "alice"); ok {
		t.Fatal("deleted entry still readable")
	}
}

func TestStoreRejects(t *testing.T) {
	s, _ := Open(Options{MaxBytes: 4})
	for _, tc := range []struct {
		id, data string
	}{{"../etc/passwd", "x"}, {"", "x"}, {"a/b", "x"}, {"ok", "12345"}} {
		if err := s.Put(tc.id, "", []byte(tc.data)); err == nil {
			t.Errorf("Put(%q, %q) succeeded", tc.id, tc.data)
		}
	}
}

func TestStorePersists(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, MaxCount: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"r1", "r2", "r3"} {
		if err := s.Put(id, "o", []byte(`"`+id+`"`)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // distinct modification times
	}
	if _, err := os.Stat(filepath.Join(dir, "r1.json")); !os.IsNotExist(err) {
		t.Fatalf("evicted entry's file: %v", err)
	}
	if _, ok := s.Get("r2", "o"); !ok { // r2 becomes the most recent
		t.Fatal("r2 missing")
	}
	os.WriteFile(filepath.Join(dir, "junk.json"), []byte("not json"), 0o600)

	s2, err := Open(Options{Dir: dir, MaxCount: 2})
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := s2.Get("r3", "o"); !ok || string(d) != `"r3"` {
		t.Fatalf("r3 after restart: %q %v", d, ok)
	}
	if err := s2.Put("r4", "o", []byte(`"r4"`)); err != nil { // evicts r2 (older than the r3 read)
		t.Fatal(err)
	}
	if _, ok := s2.Get("r2", "o"); ok {
		t.Fatal("r2 survived")
	}
	if s2.Delete("r3", "o"); fileExists(filepath.Join(dir, "r3.json")) {
		t.Fatal("deleted entry's file remains")
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestStoreConcurrent(t *testing.T) {
	s, _ := Open(Options{MaxCount: 8, Dir: t.TempDir()})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				id := fmt.Sprintf("r%d_%d", g, i%10)
				_ = s.Put(id, "o", []byte(id))
				s.Get(id, "o")
				if i%7 == 0 {
					s.Delete(id, "o")
				}
			}
		})
	}
	wg.Wait()
	if n, _ := s.Len(); n > 8 {
		t.Fatalf("%d entries over the limit", n)
	}
}

// TestStoreLoadBounded: 40 MB of valid files with a 1 MiB limit (F8: 289 MB
// read for a 1 MiB budget) allocate about the limit while loading, and the
// newest are the ones kept.
func TestStoreLoadBounded(t *testing.T) {
	dir := t.TempDir()
	doc := []byte(`"` + strings.Repeat("x", 1<<20-100) + `"`)
	for i := range 40 {
		e, _ := json.Marshal(entry{ID: fmt.Sprintf("resp_%02d", i), Owner: "o", Data: doc})
		p := filepath.Join(dir, fmt.Sprintf("resp_%02d.json", i))
		os.WriteFile(p, e, 0o600)
		mt := time.Unix(1700000000+int64(i), 0)
		os.Chtimes(p, mt, mt)
	}
	var s *Store
	cost := costtest.Measure(func() {
		var err error
		if s, err = Open(Options{Dir: dir, MaxBytes: 1 << 20}); err != nil {
			t.Fatal(err)
		}
	})
	costtest.Within(t, "loading 40 MB with a 1 MiB limit", cost, time.Second, 8<<20)
	if n, b := s.Len(); n != 1 || b > 1<<20 {
		t.Fatalf("%d entries, %d bytes loaded", n, b)
	}
	if _, ok := s.Get("resp_39", "o"); !ok {
		t.Error("the newest response was not the one kept")
	}
}

// TestEvictionSparesLightOwners: past a limit the owner holding the most
// gives up its least recently used entry, so one key storing many
// responses evicts its own and not another key's; alone, an owner's
// entries go least recently used first.
func TestEvictionSparesLightOwners(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      Options
		puts      []string // owner/id, each with 10 bytes of data
		wantThere []string
		wantGone  []string
	}{
		{"count", Options{MaxCount: 4}, []string{"alice/a1", "bob/b1", "bob/b2", "bob/b3", "bob/b4", "bob/b5", "bob/b6"},
			[]string{"alice/a1", "bob/b4", "bob/b5", "bob/b6"}, []string{"bob/b1", "bob/b2", "bob/b3"}},
		{"bytes", Options{MaxBytes: 45}, []string{"alice/a1", "alice/a2", "bob/b1", "bob/b2", "bob/b3", "bob/b4"},
			[]string{"alice/a1", "alice/a2", "bob/b3", "bob/b4"}, []string{"bob/b1", "bob/b2"}},
		{"the heavier gives first", Options{MaxCount: 3}, []string{"alice/a1", "alice/a2", "alice/a3", "bob/b1", "bob/b2"},
			[]string{"alice/a3", "bob/b1", "bob/b2"}, []string{"alice/a1", "alice/a2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.puts {
				owner, id, _ := strings.Cut(p, "/")
				if err := s.Put(id, owner, []byte(`"12345678"`)); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range tc.wantThere {
				if owner, id, _ := strings.Cut(p, "/"); !has(s, id, owner) {
					t.Errorf("%s evicted", p)
				}
			}
			for _, p := range tc.wantGone {
				if owner, id, _ := strings.Cut(p, "/"); has(s, id, owner) {
					t.Errorf("%s kept", p)
				}
			}
		})
	}
}

func has(s *Store, id, owner string) bool { _, ok := s.Get(id, owner); return ok }
