package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/hexserve/hexserve/server"
)

// modelDetails describes the model at path (name: the model's own name) for
// the Ollama listings: the files' total size, a digest of their identity
// (relative names, sizes and modification times, so it changes when a file
// does, without reading gigabytes at start-up), the newest modification
// time, and what the name says of the size and quantization ("…-3B-…",
// "…w8a16…").
func modelDetails(path, name string) (server.ModelDetails, error) {
	d := server.ModelDetails{Format: kindBundle.name, Family: "llama"}
	kind, file, err := locateModel(path)
	if err != nil {
		return d, err
	}
	d.Format = kind.name
	root := kind.root(path, file)
	var lines []string
	err = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		lines = append(lines, fmt.Sprintf("%s\x00%d\x00%d\n", filepath.ToSlash(rel), info.Size(), info.ModTime().UnixNano()))
		d.Size += info.Size()
		if info.ModTime().After(d.ModifiedAt) {
			d.ModifiedAt = info.ModTime()
		}
		return nil
	})
	if err != nil {
		return d, err
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "")))
	d.Digest = "sha256:" + hex.EncodeToString(sum[:])
	if m := paramSize.FindStringSubmatch(name); m != nil {
		d.ParameterSize = m[1] + strings.ToUpper(m[2])
	}
	if m := quantLevel.FindStringSubmatch(name); m != nil {
		d.Quantization = strings.ToUpper(m[1])
	}
	return d, nil
}

var (
	paramSize  = regexp.MustCompile(`(?i)(?:^|[-_ .])(\d+(?:\.\d+)?)([bm])(?:$|[-_ .])`)
	quantLevel = regexp.MustCompile(`(?i)(?:^|[-_ .])(w\d+a\d+|q\d+(?:_[0-9a-z]+)*)(?:$|[-_ .])`)
)
