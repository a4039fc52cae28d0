package bench

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
)

// MemSnapshot is the process's memory at one point.
type MemSnapshot struct {
	Stage string `json:"stage"`
	// From /proc/self/status, bytes.
	VmRSS    int64 `json:"vm_rss"`
	RssAnon  int64 `json:"rss_anon"`
	RssFile  int64 `json:"rss_file"`
	RssShmem int64 `json:"rss_shmem"` // rpcmem buffers (memfd) land here
	VmHWM    int64 `json:"vm_hwm"`
	// From runtime.MemStats, bytes.
	GoHeapAlloc  int64 `json:"go_heap_alloc"`
	GoHeapInuse  int64 `json:"go_heap_inuse"`
	GoStackInuse int64 `json:"go_stack_inuse"`
	GoSys        int64 `json:"go_sys"`
	GoReleased   int64 `json:"go_heap_released"`
	// GoRuntime is Sys − HeapReleased: everything the Go runtime holds from
	// the OS (heap, stacks, GC metadata), the Go side of RSS at most.
	GoRuntime int64 `json:"go_runtime"`
}

// snapshot reads /proc/self/status (zero fields where it is missing) and the Go runtime's figures.
func snapshot(stage string) MemSnapshot {
	s := MemSnapshot{Stage: stage}
	if f, err := os.Open("/proc/self/status"); err == nil {
		parseStatus(f, &s)
		f.Close()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.GoHeapAlloc, s.GoHeapInuse, s.GoStackInuse = int64(ms.HeapAlloc), int64(ms.HeapInuse), int64(ms.StackInuse)
	s.GoSys, s.GoReleased = int64(ms.Sys), int64(ms.HeapReleased)
	s.GoRuntime = s.GoSys - s.GoReleased
	return s
}

// parseStatus fills the VmRSS, RssAnon, RssFile, RssShmem and VmHWM fields.
func parseStatus(r io.Reader, s *MemSnapshot) {
	fields := map[string]*int64{"VmRSS:": &s.VmRSS, "RssAnon:": &s.RssAnon, "RssFile:": &s.RssFile,
		"RssShmem:": &s.RssShmem, "VmHWM:": &s.VmHWM}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 {
			if p, ok := fields[f[0]]; ok {
				*p = kB(f[1])
			}
		}
	}
}

func kB(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n << 10
}

// MappedFile is a file of the bundle mapped into the process.
type MappedFile struct {
	Path string `json:"path"`
	Size int64  `json:"size"`   // file size
	Map  int64  `json:"mapped"` // bytes of its mappings
	RSS  int64  `json:"rss"`    // resident bytes of its mappings
}

// mappedFiles lists the mappings of files under dir, from /proc/self/smaps.
func mappedFiles(dir string) []MappedFile {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil
	}
	defer f.Close()
	return parseSmaps(f, dir)
}

func parseSmaps(r io.Reader, dir string) []MappedFile {
	dir = filepath.Clean(dir) + string(filepath.Separator)
	byPath := map[string]*MappedFile{}
	var cur *MappedFile
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") { // a mapping header: addr perms offset dev inode [path]
			cur = nil
			if len(f) >= 6 && strings.HasPrefix(f[5], dir) {
				p := f[5]
				if byPath[p] == nil {
					byPath[p] = &MappedFile{Path: p}
					if st, err := os.Stat(p); err == nil {
						byPath[p].Size = st.Size()
					}
				}
				cur = byPath[p]
			}
			continue
		}
		if cur != nil && len(f) >= 2 {
			switch f[0] {
			case "Size:":
				cur.Map += kB(f[1])
			case "Rss:":
				cur.RSS += kB(f[1])
			}
		}
	}
	var out []MappedFile
	for _, m := range byPath {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// dirSize sums the sizes of the regular files in dir (not recursive).
func dirSize(dir string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
	}
	return n
}
