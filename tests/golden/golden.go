package golden

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/pmezard/go-difflib/difflib"
	"sigs.k8s.io/yaml"

	"github.com/agentsandbox/reconciler/tests"
)

var update = flag.Bool("update", false, "rewrite golden files under golden/ from the current output")

// Updating reports whether the tests run with -update.
func Updating() bool { return *update }

// Dir returns the repository's golden/ directory.
func Dir() string { return filepath.Join(tests.RepoRoot(), "golden") }

// Assert compares got with the golden file at path (relative to golden/ unless
// absolute). With -update it writes got to the file instead.
func Assert(t testing.TB, path string, got []byte) {
	t.Helper()
	if !filepath.IsAbs(path) {
		path = filepath.Join(Dir(), path)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatalf("golden: %v", err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("golden: %v", err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t.Errorf("golden file %s does not exist: run the test with -update (make golden) to create it, then review it", rel(path))
		return
	} else if err != nil {
		t.Fatalf("golden: %v", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("output differs from golden file %s:\n%s\nIf the change is intended, run the test with -update (make golden) and review the diff.",
			rel(path), Diff(rel(path), string(want), string(got)))
	}
}

// AssertYAML marshals v as YAML with sorted keys and compares it with the
// golden file at path.
func AssertYAML(t testing.TB, path string, v any) {
	t.Helper()
	got, err := yaml.Marshal(v)
	if err != nil {
		t.Fatalf("golden: marshalling %T: %v", v, err)
	}
	Assert(t, path, got)
}

// Case is one golden case: a directory golden/<kind>/<name>/ holding input
// manifests and expected output.
type Case struct {
	Name string
	Dir  string
}

// Read returns the contents of a file of the case.
func (c Case) Read(t testing.TB, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Dir, file))
	if err != nil {
		t.Fatalf("golden case %s: %v", c.Name, err)
	}
	return b
}

// Path returns the path of a file of the case.
func (c Case) Path(file string) string { return filepath.Join(c.Dir, file) }

// Cases lists the case directories of golden/<kind>/, sorted by name. It
// fails the test when there are none, so a misplaced directory cannot turn a
// golden test into one that checks nothing.
func Cases(t testing.TB, kind string) []Case {
	t.Helper()
	root := filepath.Join(Dir(), kind)
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatalf("golden: listing cases: %v", err)
	}
	var cases []Case
	for _, e := range entries {
		if e.IsDir() {
			cases = append(cases, Case{Name: e.Name(), Dir: filepath.Join(root, e.Name())})
		}
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].Name < cases[j].Name })
	if len(cases) == 0 {
		t.Fatalf("golden: no cases under %s", rel(root))
	}
	return cases
}

// Diff returns a unified diff from want to got.
func Diff(name, want, got string) string {
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(want), B: difflib.SplitLines(got),
		FromFile: name + " (golden)", ToFile: name + " (got)", Context: 3,
	})
	if err != nil {
		return err.Error()
	}
	return d
}

func rel(path string) string {
	if r, err := filepath.Rel(tests.RepoRoot(), path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}
