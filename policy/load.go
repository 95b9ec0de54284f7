package policy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Config says where policies come from: built-in bundles and YAML files in
// a directory (every *.yaml, *.yml and *.json in it).
type Config struct {
	// Bundles are built-in bundles loaded with their bindings' own
	// actions (Deny), when Modes is nil.
	Bundles []string
	// Modes, when set, are the bundles' cluster-wide modes: every built-in
	// bundle is loaded (so a namespace can turn on one that is off by
	// default) and checks use these modes unless the context carries a
	// namespace's (WithModes).
	Modes Modes
	Dir   string
}

// bundles lists the built-in bundles to load.
func (c Config) bundles() []string {
	if c.Modes != nil {
		return Bundles()
	}
	return c.Bundles
}

// Sources reads the configured bundles and files.
func (c Config) Sources() ([]Source, error) {
	var bundles []Source
	for _, name := range c.bundles() {
		src, err := Bundle(name)
		if err != nil {
			return nil, err
		}
		bundles = append(bundles, src)
	}
	files, err := c.files()
	if err != nil {
		return nil, err
	}
	return append(Unshadowed(bundles, c.Modes, files), files...), nil
}

// Unshadowed drops the bundles that are off and define a policy one of the
// files defines too (a copy of a bundle installed as files, say): loaded
// alongside, they would clash; on, the clash is an error for the user.
func Unshadowed(bundles []Source, modes Modes, files []Source) []Source {
	if modes == nil {
		return bundles
	}
	theirs := map[string]bool{}
	for _, f := range files {
		for _, n := range policyNames(f) {
			theirs[n] = true
		}
	}
	var out []Source
	for _, b := range bundles {
		shadowed := false
		for _, n := range policyNames(b) {
			shadowed = shadowed || theirs[n]
		}
		if shadowed && modes.Of(b.Bundle) == ModeOff {
			continue
		}
		out = append(out, b)
	}
	return out
}

// policyNames lists the names of the ValidatingAdmissionPolicies in a
// source (what parses; Load reports the rest).
func policyNames(s Source) []string {
	var out []string
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(s.Data), 4096)
	for {
		var d struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := dec.Decode(&d); err != nil {
			return out
		}
		if d.Kind == "ValidatingAdmissionPolicy" {
			out = append(out, d.Metadata.Name)
		}
	}
}

// files reads the YAML files of the policy directory.
func (c Config) files() ([]Source, error) {
	var out []Source
	if c.Dir == "" {
		return out, nil
	}
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return nil, fmt.Errorf("reading policy directory: %w", err)
	}
	var names []string
	for _, e := range entries {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				names = append(names, e.Name())
			}
		}
	}
	sort.Strings(names)
	for _, n := range names {
		path := filepath.Join(c.Dir, n)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading policy file: %w", err)
		}
		out = append(out, Source{Name: path, Data: data})
	}
	return out, nil
}

// LoadConfig reads and compiles the configured policies.
func LoadConfig(c Config) (*Set, error) {
	srcs, err := c.Sources()
	if err != nil {
		return nil, err
	}
	return c.LoadSources(srcs)
}

// LoadSources compiles sources (read for c, or assembled by the caller)
// with c's default modes.
func (c Config) LoadSources(srcs []Source) (*Set, error) {
	set, err := Load(srcs...)
	if err != nil {
		return nil, err
	}
	set.defaults = c.Modes
	return set, nil
}

func digestOf(srcs []Source) string {
	h := sha256.New()
	for _, s := range srcs {
		_, _ = fmt.Fprintf(h, "%s\x00%d\x00", s.Name, len(s.Data))
		_, _ = h.Write(s.Data)
	}
	return string(h.Sum(nil))
}

// Watch reloads the policies whenever the files change (checked every
// interval) until ctx ends. A change is loaded once it has been stable for
// one interval, so a file caught half-written is never loaded. A set that
// fails to load never replaces the current one: onError gets the error and
// the last good set stays. onLoad is called after each successful reload.
func Watch(ctx context.Context, c Config, h *Holder, interval time.Duration, onLoad func(*Set), onError func(error)) {
	// Compare with what the set in force was loaded from, so that an edit
	// made between that load and this call is not missed.
	last := ""
	if cur := h.Get(); cur != nil {
		last = cur.digest
	}
	pending := ""
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		srcs, err := c.Sources()
		if err != nil {
			onError(err)
			continue
		}
		d := digestOf(srcs)
		if d == last {
			pending = ""
			continue
		}
		if d != pending {
			// Changed since the last look: wait until it settles.
			pending = d
			continue
		}
		last, pending = d, ""
		set, err := c.LoadSources(srcs)
		if err != nil {
			onError(err)
			continue
		}
		h.Set(set)
		if onLoad != nil {
			onLoad(set)
		}
	}
}
