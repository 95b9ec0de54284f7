package crd

import (
	"embed"
	"io/fs"
	"sort"
)

//go:embed bases/*.yaml
var bases embed.FS

// Definitions returns the generated CRDs' YAML, sorted by file name.
func Definitions() ([][]byte, error) {
	names, err := fs.Glob(bases, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([][]byte, 0, len(names))
	for _, n := range names {
		b, err := bases.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
