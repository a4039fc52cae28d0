package qnn

import (
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/rs/zerolog"
)

// LogLevel is a QnnLog_Level_t: the most verbose level the backend reports.
type LogLevel uint32

// QNN log levels.
const (
	LogError   LogLevel = 1
	LogWarn    LogLevel = 2
	LogInfo    LogLevel = 3
	LogVerbose LogLevel = 4
	LogDebug   LogLevel = 5
)

// The C callback is created once per process (purego callbacks are never
// freed) and writes to the logger of the most recent Open that asked for
// one: QNN's callback carries no user pointer.
var (
	logCB struct {
		once sync.Once
		fn   uintptr
	}
	logSink atomic.Pointer[zerolog.Logger]
)

func setLogSink(l *zerolog.Logger) { logSink.Store(l) }

// logCallback returns the QnnLog_Callback_t
// void (*)(const char* fmt, QnnLog_Level_t level, uint64_t timestamp, va_list args).
// On LP64 targets the va_list arrives as one pointer (x86_64: the array
// decays; AAPCS64: the struct is passed by reference) and is forwarded to
// libc vsnprintf unchanged. Checked on linux amd64/arm64; UNCONFIRMED on
// Android bionic.
func logCallback() uintptr {
	logCB.once.Do(func() {
		logCB.fn = purego.NewCallback(func(format unsafe.Pointer, level uint32, ts uint64, ap unsafe.Pointer) {
			l := logSink.Load()
			if l == nil || format == nil {
				return
			}
			var buf [1024]byte
			n := libc.f.vsnprintf(unsafe.Pointer(&buf[0]), uintptr(len(buf)), format, ap)
			if n < 0 {
				return
			}
			msg := strings.TrimRight(string(buf[:min(int(n), len(buf)-1)]), "\n")
			var ev *zerolog.Event
			switch LogLevel(level) {
			case LogError:
				ev = l.Error()
			case LogWarn:
				ev = l.Warn()
			case LogInfo:
				ev = l.Info()
			default:
				ev = l.Debug()
			}
			ev.Uint32("qnn_level", level).Uint64("qnn_ts", ts).Msg(msg)
		})
	})
	return logCB.fn
}
