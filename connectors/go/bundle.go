package main

// The bundle: manifest.json and the six scripts, checked byte for byte at start-up (SPEC §2, R2.1).

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

// scriptOrder is the order the digest joins the SHAs in (SPEC §2).
var scriptOrder = []string{"enqueue", "claim", "complete", "retry", "promote", "reap"}

// Script is one bundle script: its name, its exact bytes and their sha1.
type Script struct {
	Name   string
	SHA    string
	Source string
}

// Bundle is the loaded, verified bundle.
type Bundle struct {
	Dir      string
	Version  string // manifest "bundle", e.g. 1.0.0
	Protocol string // manifest "protocol" as the fence spells it, e.g. "1"
	Digest   string
	Scripts  map[string]*Script
}

type manifest struct {
	Bundle   string          `json:"bundle"`
	Protocol json.RawMessage `json:"protocol"`
	Digest   string          `json:"digest"`
	Scripts  []struct {
		Name string `json:"name"`
		File string `json:"file"`
		SHA1 string `json:"sha1"`
	} `json:"scripts"`
}

func sha1Hex(b []byte) string {
	h := sha1.Sum(b)
	return hex.EncodeToString(h[:])
}

// checkScriptBytes applies R2.1: UTF-8, LF line ends, no BOM, no CR, one final LF.
func checkScriptBytes(name string, b []byte) error {
	switch {
	case !utf8.Valid(b):
		return fmt.Errorf("script %s is not UTF-8", name)
	case bytes.HasPrefix(b, []byte{0xEF, 0xBB, 0xBF}):
		return fmt.Errorf("script %s starts with a BOM", name)
	case bytes.IndexByte(b, '\r') >= 0:
		return fmt.Errorf("script %s contains a CR", name)
	case len(b) == 0 || b[len(b)-1] != '\n':
		return fmt.Errorf("script %s does not end with one LF", name)
	case bytes.HasSuffix(b, []byte("\n\n")):
		return fmt.Errorf("script %s ends with more than one LF", name)
	}
	return nil
}

// LoadBundle reads dir/manifest.json and the scripts it lists, and verifies every sha1 and the digest.
func LoadBundle(dir string) (*Bundle, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %v", dir, err)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("bundle %s: manifest.json: %v", dir, err)
	}
	proto := strings.Trim(string(m.Protocol), `"`)
	if _, err := strconv.ParseUint(proto, 10, 32); err != nil {
		return nil, fmt.Errorf("bundle %s: manifest protocol %q is not a number", dir, string(m.Protocol))
	}
	b := &Bundle{Dir: dir, Version: m.Bundle, Protocol: proto, Digest: m.Digest, Scripts: map[string]*Script{}}
	if b.Version == "" {
		return nil, fmt.Errorf("bundle %s: manifest has no bundle version", dir)
	}
	for _, s := range m.Scripts {
		src, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(s.File)))
		if err != nil {
			return nil, fmt.Errorf("bundle %s: script %s: %v", dir, s.Name, err)
		}
		if err := checkScriptBytes(s.Name, src); err != nil {
			return nil, fmt.Errorf("bundle %s: %v", dir, err)
		}
		got := sha1Hex(src)
		if got != s.SHA1 {
			return nil, fmt.Errorf("bundle %s: script %s has sha1 %s, manifest says %s", dir, s.Name, got, s.SHA1)
		}
		if _, dup := b.Scripts[s.Name]; dup {
			return nil, fmt.Errorf("bundle %s: script %s listed twice", dir, s.Name)
		}
		b.Scripts[s.Name] = &Script{Name: s.Name, SHA: got, Source: string(src)}
	}
	shas := make([]string, 0, len(scriptOrder))
	for _, name := range scriptOrder {
		s, ok := b.Scripts[name]
		if !ok {
			return nil, fmt.Errorf("bundle %s: manifest lacks script %s", dir, name)
		}
		shas = append(shas, s.SHA)
	}
	if len(b.Scripts) != len(scriptOrder) {
		return nil, fmt.Errorf("bundle %s: manifest lists %d scripts, want %d", dir, len(b.Scripts), len(scriptOrder))
	}
	if d := sha1Hex([]byte(strings.Join(shas, "\n"))); d != b.Digest {
		return nil, fmt.Errorf("bundle %s: digest of the scripts is %s, manifest says %s", dir, d, b.Digest)
	}
	return b, nil
}

// FindBundleDir picks the bundle: --bundle, else $EMQ_BUNDLE_DIR, else the directory baked in at
// build time (ci/provision), else a bundle/ found above the executable or the working directory.
func FindBundleDir(flagDir string) string {
	if flagDir != "" {
		return flagDir
	}
	if d := os.Getenv("EMQ_BUNDLE_DIR"); d != "" {
		return d
	}
	if defaultBundleDir != "" {
		return defaultBundleDir
	}
	var starts []string
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, d := range starts {
		for {
			c := filepath.Join(d, "bundle")
			if _, err := os.Stat(filepath.Join(c, "manifest.json")); err == nil {
				return c
			}
			p := filepath.Dir(d)
			if p == d {
				break
			}
			d = p
		}
	}
	return "bundle"
}
