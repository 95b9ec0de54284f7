package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder captures failures instead of failing the real test.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestAssert(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.yaml")

	r := &recorder{TB: t}
	Assert(r, path, []byte("a: 1\n"))
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], "does not exist") {
		t.Fatalf("missing golden file: errors = %q", r.errors)
	}

	if err := os.WriteFile(path, []byte("a: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = &recorder{TB: t}
	Assert(r, path, []byte("a: 1\n"))
	if len(r.errors) != 0 {
		t.Fatalf("equal output: errors = %q", r.errors)
	}

	r = &recorder{TB: t}
	AssertYAML(r, path, map[string]int{"b": 2, "a": 1})
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], "+b: 2") {
		t.Fatalf("different output: errors = %q", r.errors)
	}

	*update = true
	defer func() { *update = false }()
	r = &recorder{TB: t}
	AssertYAML(r, path, map[string]int{"b": 2, "a": 1})
	got, _ := os.ReadFile(path)
	if len(r.errors) != 0 || string(got) != "a: 1\nb: 2\n" {
		t.Fatalf("-update: errors = %q, file = %q (want sorted keys)", r.errors, got)
	}
}
