package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fake is a model that counts its opens and closes.
type fake struct {
	id     string
	closed bool
	log    *events
}

func (f *fake) Close() error {
	if f.closed {
		panic("closed twice: " + f.id)
	}
	f.closed = true
	f.log.add("unload " + f.id)
	return nil
}

type events struct {
	mu   sync.Mutex
	list []string
}

func (e *events) add(s string) { e.mu.Lock(); e.list = append(e.list, s); e.mu.Unlock() }
func (e *events) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.list
	e.list = nil
	return l
}

// entry is a fake entry of mem bytes that loads in loadTime (fails with
// fail when set).
func entry(log *events, id string, mem int64, keep time.Duration, fail error) Entry[*fake] {
	return Entry[*fake]{ID: id, Estimate: mem, KeepAlive: keep, Load: func(context.Context) (*fake, int64, error) {
		time.Sleep(time.Second) // the load takes a (fake) second
		if fail != nil {
			return nil, 0, fail
		}
		log.add("load " + id)
		return &fake{id: id, log: log}, mem, nil
	}}
}

func use(t *testing.T, r *Registry[*fake], id string, keep *time.Duration) time.Duration {
	t.Helper()
	l, err := r.Acquire(t.Context(), id)
	if err != nil {
		t.Fatalf("Acquire(%s): %v", id, err)
	}
	if l.Model.id != id || l.Model.closed {
		t.Fatalf("Acquire(%s) gave %s (closed %v)", id, l.Model.id, l.Model.closed)
	}
	l.Release(keep)
	synctest.Wait()
	return l.Loaded
}

func TestRegistry(t *testing.T) {
	zero, never := time.Duration(0), time.Duration(-1)
	tests := []struct {
		name string
		opts Options
		keep time.Duration
		run  func(t *testing.T, r *Registry[*fake])
		want []string
	}{
		{"on demand, once", Options{}, time.Minute, func(t *testing.T, r *Registry[*fake]) {
			if d := use(t, r, "a", nil); d != time.Second {
				t.Errorf("first request waited %v for the load, want 1s", d)
			}
			if d := use(t, r, "a", nil); d != 0 {
				t.Errorf("second request waited %v, want 0", d)
			}
		}, []string{"load a"}},
		{"count limit unloads the least recently used", Options{MaxLoaded: 2}, time.Hour, func(t *testing.T, r *Registry[*fake]) {
			use(t, r, "a", nil)
			use(t, r, "b", nil)
			use(t, r, "a", nil)
			use(t, r, "c", nil) // b is the least recently used
		}, []string{"load a", "load b", "unload b", "load c"}},
		{"memory budget", Options{Memory: 250}, time.Hour, func(t *testing.T, r *Registry[*fake]) {
			use(t, r, "a", nil) // 100
			use(t, r, "b", nil) // 100: 200 fits
			use(t, r, "c", nil) // 100: 300 does not, a goes
		}, []string{"load a", "load b", "unload a", "load c"}},
		{"keep_alive 0 unloads after each request", Options{}, 0, func(t *testing.T, r *Registry[*fake]) {
			use(t, r, "a", nil)
			use(t, r, "a", nil)
		}, []string{"load a", "unload a", "load a", "unload a"}},
		{"keep_alive expires", Options{}, time.Minute, func(t *testing.T, r *Registry[*fake]) {
			use(t, r, "a", nil)
			time.Sleep(30 * time.Second)
			use(t, r, "a", nil) // restarts the minute
			time.Sleep(59 * time.Second)
			if st := r.States()[0]; !st.Loaded {
				t.Error("unloaded before its keep-alive")
			}
			time.Sleep(2 * time.Second)
			synctest.Wait()
			if st := r.States()[0]; st.Loaded {
				t.Error("still loaded after its keep-alive")
			}
		}, []string{"load a", "unload a"}},
		{"per-request keep_alive", Options{}, never, func(t *testing.T, r *Registry[*fake]) {
			use(t, r, "a", nil)
			use(t, r, "a", &zero) // unloads after this request
			use(t, r, "a", nil)   // the entry's keep-alive again: stays
			time.Sleep(time.Hour)
		}, []string{"load a", "unload a", "load a"}},
		{"busy models are not evicted", Options{MaxLoaded: 1}, time.Hour, func(t *testing.T, r *Registry[*fake]) {
			la, err := r.Acquire(t.Context(), "a")
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				l, err := r.Acquire(t.Context(), "b")
				if err == nil {
					l.Release(nil)
				}
				got <- err
			}()
			time.Sleep(10 * time.Second)
			synctest.Wait()
			if len(got) != 0 || la.Model.closed {
				t.Fatal("b loaded while a was busy")
			}
			la.Release(nil)
			if err := <-got; err != nil {
				t.Fatal(err)
			}
		}, []string{"load a", "unload a", "load b"}},
		{"a wait for room ends with its context", Options{MaxLoaded: 1}, time.Hour, func(t *testing.T, r *Registry[*fake]) {
			la, err := r.Acquire(t.Context(), "a")
			if err != nil {
				t.Fatal(err)
			}
			busy := errors.New("busy")
			ctx, cancel := context.WithTimeoutCause(t.Context(), time.Minute, busy)
			defer cancel()
			if _, err := r.Acquire(ctx, "b"); err != busy {
				t.Errorf("err = %v, want the context's cause", err)
			}
			la.Release(nil)
		}, []string{"load a"}},
		{"too large alone", Options{Memory: 50}, time.Hour, func(t *testing.T, r *Registry[*fake]) {
			_, err := r.Acquire(t.Context(), "a")
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err = %v, want ErrTooLarge", err)
			}
		}, nil},
		{"a failing load, the others serve", Options{}, time.Hour, func(t *testing.T, r *Registry[*fake]) {
			for range 2 { // each request tries again
				if _, err := r.Acquire(t.Context(), "bad"); err == nil || err.Error() != "broken file" {
					t.Fatalf("err = %v", err)
				}
			}
			use(t, r, "a", nil)
			if st := r.States()[3]; st.Err == nil || st.Loaded {
				t.Errorf("bad's state = %+v", st)
			}
		}, []string{"load a"}},
		{"unknown", Options{}, time.Hour, func(t *testing.T, r *Registry[*fake]) {
			if _, err := r.Acquire(t.Context(), "zz"); !errors.Is(err, ErrUnknown) {
				t.Fatalf("err = %v", err)
			}
		}, nil},
		{"waiters share one load", Options{}, time.Hour, func(t *testing.T, r *Registry[*fake]) {
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() {
					if l, err := r.Acquire(t.Context(), "a"); err == nil {
						l.Release(nil)
					}
				})
			}
			wg.Wait()
		}, []string{"load a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &events{}
				var es []Entry[*fake]
				for _, id := range []string{"a", "b", "c"} {
					es = append(es, entry(log, id, 100, tt.keep, nil))
				}
				es = append(es, entry(log, "bad", 100, tt.keep, fmt.Errorf("broken file")))
				r := New(tt.opts, es)
				tt.run(t, r)
				synctest.Wait()
				if got := log.take(); !slices.Equal(got, tt.want) {
					t.Errorf("events = %q, want %q", got, tt.want)
				}
				r.Close()
				for _, st := range r.States() {
					if st.Loaded || st.Loading {
						t.Errorf("%s still loaded after Close", st.ID)
					}
				}
				if _, err := r.Acquire(context.Background(), "a"); !errors.Is(err, ErrClosed) {
					t.Errorf("Acquire after Close: %v", err)
				}
			})
		})
	}
}
