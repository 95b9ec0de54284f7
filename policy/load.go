package policy

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
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
	var out []Source
	for _, name := range c.bundles() {
		src, err := Bundle(name)
		if err != nil {
			return nil, err
		}
		out = append(out, src)
	}
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
	return c.load(srcs)
}

// load compiles sources read for c, with c's default modes.
func (c Config) load(srcs []Source) (*Set, error) {
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
		set, err := c.load(srcs)
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
