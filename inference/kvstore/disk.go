package kvstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/internal/modelfile"
)

// File format (little endian):
//
//	magic "HXKVSNP1" | u32 header length | header (JSON) | rows | u32 CRC-32C of all before it
//
// The header names the model layout, the owner, the tag and the tokens;
// rows are len(tokens) × RowBytes. A file is named after a hash of its
// owner and tokens, so a renamed or copied file is refused too.
const (
	magic  = "HXKVSNP1"
	suffix = ".kv"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type header struct {
	Identity string  `json:"identity"`
	RowBytes int     `json:"row_bytes"`
	Owner    string  `json:"owner"`
	Tag      string  `json:"tag,omitempty"`
	Tokens   []int32 `json:"tokens"`
}

// diskFile is one indexed file.
type diskFile struct {
	name   string // base name
	owner  string
	tag    string
	toks   []int32
	size   int64
	serial uint64 // write order (oldest first out)
}

// disk is the spill directory's index.
type disk struct {
	dir    string
	budget int64
	layout inference.KVLayout
	log    zerolog.Logger
	files  []*diskFile
	bytes  int64
	serial uint64
}

func openDisk(dir string, budget int64, layout inference.KVLayout, log zerolog.Logger) (*disk, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("kvstore: %w", err)
	}
	d := &disk{dir: dir, budget: budget, layout: layout, log: log}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("kvstore: %w", err)
	}
	type dated struct {
		f   *diskFile
		mod int64
	}
	var found []dated
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), suffix) {
			continue
		}
		if _, err := modelfile.StatIn(dir, e.Name()); err != nil { // not ours: left alone
			log.Warn().Err(err).Str("file", e.Name()).Msg("kvstore: refusing a file in the directory")
			continue
		}
		f, err := d.index(e.Name())
		if err != nil {
			log.Warn().Err(err).Str("file", e.Name()).Msg("kvstore: dropping a saved entry")
			os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		var mod int64
		if info, err := e.Info(); err == nil {
			mod = info.ModTime().UnixNano()
		}
		found = append(found, dated{f, mod})
	}
	slices.SortFunc(found, func(a, b dated) int { return int(min(max(a.mod-b.mod, -1), 1)) })
	for _, x := range found {
		d.serial++
		x.f.serial = d.serial
		d.files = append(d.files, x.f)
		d.bytes += x.f.size
	}
	d.trim(nil)
	log.Info().Int("entries", len(d.files)).Int64("bytes", d.bytes).Str("dir", dir).Msg("kvstore: disk entries indexed")
	return d, nil
}

// index reads a file's header and checks it against the layout and its name.
func (d *disk) index(name string) (*diskFile, error) {
	fh, info, err := modelfile.OpenIn(d.dir, name, d.budget)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	h, err := readHeader(fh, info.Size())
	if err != nil {
		return nil, err
	}
	switch {
	case h.Identity != d.layout.Identity:
		return nil, fmt.Errorf("saved by another model (%q, this one is %q)", h.Identity, d.layout.Identity)
	case h.RowBytes != d.layout.RowBytes:
		return nil, fmt.Errorf("rows of %d bytes, the model's are %d", h.RowBytes, d.layout.RowBytes)
	case len(h.Tokens) == 0:
		return nil, errors.New("no tokens")
	case fileName(h.Owner, h.Tokens) != name:
		return nil, errors.New("the name does not match its owner and tokens")
	}
	hl, _ := json.Marshal(h)
	if want := int64(len(magic)+4+len(hl)+4) + int64(len(h.Tokens))*int64(h.RowBytes); info.Size() != want {
		return nil, fmt.Errorf("%d bytes, want %d for %d rows", info.Size(), want, len(h.Tokens))
	}
	return &diskFile{name: name, owner: h.Owner, tag: h.Tag, toks: h.Tokens, size: info.Size()}, nil
}

// readHeader reads the header of a file of size bytes.
func readHeader(r io.Reader, size int64) (header, error) {
	var h header
	var pre [len(magic) + 4]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return h, fmt.Errorf("short header: %w", err)
	}
	if string(pre[:len(magic)]) != magic {
		return h, errors.New("not a KV snapshot (bad magic)")
	}
	n := binary.LittleEndian.Uint32(pre[len(magic):])
	if n > 64<<20 || int64(n) > size-int64(len(pre)) {
		return h, fmt.Errorf("header of %d bytes", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return h, fmt.Errorf("short header: %w", err)
	}
	if err := json.Unmarshal(buf, &h); err != nil {
		return h, fmt.Errorf("header: %w", err)
	}
	return h, nil
}

// fileName is the hash of owner and tokens.
func fileName(owner string, toks []int32) string {
	h := sha256.New()
	h.Write([]byte(owner))
	h.Write([]byte{0})
	binary.Write(h, binary.LittleEndian, toks)
	return hex.EncodeToString(h.Sum(nil)[:16]) + suffix
}

// best returns owner's file sharing the longest prefix with seq, and its length.
func (d *disk) best(owner string, seq []int32) (*diskFile, int) {
	var bf *diskFile
	bn := 0
	for _, f := range d.files {
		if f.owner != owner {
			continue
		}
		if n := inference.CommonPrefix(f.toks, seq); n > bn {
			bf, bn = f, n
		}
	}
	return bf, bn
}

// read loads a file, verifies it in full and removes it from the directory
// (it now lives in memory and is written again when evicted). A file that
// fails a check is removed too.
func (d *disk) read(f *diskFile) ([]int32, []byte, error) {
	d.drop(f)
	path := filepath.Join(d.dir, f.name)
	data, _, err := modelfile.ReadFileIn(d.dir, f.name, f.size)
	os.Remove(path)
	if err != nil {
		return nil, nil, err
	}
	if len(data) < len(magic)+8 {
		return nil, nil, errors.New("truncated")
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, nil, errors.New("checksum mismatch (corrupted file)")
	}
	r := bytes.NewReader(body)
	h, err := readHeader(r, int64(len(body)))
	if err != nil {
		return nil, nil, err
	}
	if h.Identity != d.layout.Identity || h.RowBytes != d.layout.RowBytes || h.Owner != f.owner ||
		!slices.Equal(h.Tokens, f.toks) {
		return nil, nil, errors.New("the file changed since it was indexed")
	}
	rows := body[len(body)-r.Len():]
	if len(rows) != len(h.Tokens)*h.RowBytes {
		return nil, nil, fmt.Errorf("%d bytes of rows, want %d", len(rows), len(h.Tokens)*h.RowBytes)
	}
	return h.Tokens, rows, nil
}

// write saves a sequence's rows unless a file of the same owner already
// holds it (or a longer sequence starting with it); files it extends are
// removed. The oldest files go when the budget is exceeded.
func (d *disk) write(owner, tag string, toks []int32, rows []byte) error {
	if _, n := d.best(owner, toks); n == len(toks) {
		return nil
	}
	h := header{Identity: d.layout.Identity, RowBytes: d.layout.RowBytes, Owner: owner, Tag: tag, Tokens: toks}
	hl, err := json.Marshal(h)
	if err != nil {
		return err
	}
	size := int64(len(magic)+4+len(hl)+4) + int64(len(rows))
	if size > d.budget {
		return nil
	}
	var buf bytes.Buffer
	buf.Grow(int(size))
	buf.WriteString(magic)
	binary.Write(&buf, binary.LittleEndian, uint32(len(hl)))
	buf.Write(hl)
	buf.Write(rows)
	binary.Write(&buf, binary.LittleEndian, crc32.Checksum(buf.Bytes(), castagnoli))
	name := fileName(owner, toks)
	tmp := filepath.Join(d.dir, name+".tmp")
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("kvstore: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(d.dir, name)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("kvstore: %w", err)
	}
	for _, f := range slices.Clone(d.files) {
		if f.owner == owner && len(f.toks) < len(toks) && slices.Equal(f.toks, toks[:len(f.toks)]) {
			d.drop(f)
			os.Remove(filepath.Join(d.dir, f.name))
		}
	}
	d.serial++
	f := &diskFile{name: name, owner: owner, tag: tag, toks: slices.Clone(toks), size: size, serial: d.serial}
	d.files = append(d.files, f)
	d.bytes += size
	d.trim(f)
	return nil
}

// drop forgets f (the caller removes the file).
func (d *disk) drop(f *diskFile) {
	if i := slices.Index(d.files, f); i >= 0 {
		d.files = slices.Delete(d.files, i, i+1)
		d.bytes -= f.size
	}
}

// trim removes files until the directory is within its budget: the oldest
// of the owner holding the most bytes (one key spilling many conversations
// removes its own, not another key's), keep (the file just written) only
// when it is all there is.
func (d *disk) trim(keep *diskFile) {
	owned := map[string]int64{}
	for _, f := range d.files {
		owned[f.owner] += f.size
	}
	for d.bytes > d.budget && len(d.files) > 0 {
		victim := keep
	owners:
		for _, o := range heaviestFirst(owned) {
			for _, f := range d.files { // in write order: an owner's first is its oldest
				if f.owner == o && f != keep {
					victim = f
					break owners
				}
			}
		}
		owned[victim.owner] -= victim.size
		d.drop(victim)
		os.Remove(filepath.Join(d.dir, victim.name))
	}
}
