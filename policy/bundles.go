package policy

import (
	"embed"
	"fmt"
	"sort"
	"strings"
)

//go:embed bundles/*.yaml
var bundles embed.FS

// Bundle names.
const (
	BundleRuntimeIsolation = "runtime-isolation"
	BundleBaseline         = "baseline"
	BundleRestricted       = "restricted"
)

// DefaultBundles are the bundles on unless configured otherwise.
var DefaultBundles = []string{BundleRuntimeIsolation, BundleBaseline}

// DefaultModes are the cluster-wide modes unless configured otherwise:
// DefaultBundles enforced, the others off.
func DefaultModes() Modes {
	m := Modes{}
	for _, b := range DefaultBundles {
		m[b] = ModeEnforce
	}
	return m
}

// Bundles lists the built-in bundles.
func Bundles() []string {
	entries, _ := bundles.ReadDir("bundles")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// Bundle returns a built-in bundle as a source.
func Bundle(name string) (Source, error) {
	data, err := bundles.ReadFile("bundles/" + name + ".yaml")
	if err != nil {
		return Source{}, fmt.Errorf("no built-in policy bundle %q (there are: %s)", name, strings.Join(Bundles(), ", "))
	}
	return Source{Name: "bundle " + name, Data: data, Bundle: name}, nil
}
