package testwait

import (
	"testing"
	"time"
)

// fatalTB records Fatalf and stops its goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = format
	panic(f)
}

// TestRecv: a sent value is returned; an empty channel fails after d.
func TestRecv(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if v := Recv(t, ch, time.Second, "seven"); v != 7 {
		t.Fatalf("got %d", v)
	}
	f := &fatalTB{TB: t}
	start := time.Now()
	func() {
		defer func() {
			if r := recover(); r != f {
				t.Fatalf("recovered %v", r)
			}
		}()
		Recv(f, make(chan int), 20*time.Millisecond, "nothing")
	}()
	if f.msg == "" || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("failed %q after %v", f.msg, time.Since(start))
	}
}
