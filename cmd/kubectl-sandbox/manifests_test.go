package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\n"

// TestExpandSymlinks: a directory given with -f is a tree nothing outside of
// which is read. Links out of it are refused, links inside are fine, loops
// and FIFOs neither hang nor get read.
func TestExpandSymlinks(t *testing.T) {
	type layout func(t *testing.T, tree, outside string)
	file := func(p string) func(t *testing.T, tree, outside string) {
		return func(t *testing.T, tree, outside string) { write(t, filepath.Join(tree, p)) }
	}
	link := func(target, name string) func(t *testing.T, tree, outside string) {
		return func(t *testing.T, tree, outside string) {
			target := strings.NewReplacer("$TREE", tree, "$OUT", outside).Replace(target)
			mkdir(t, filepath.Dir(filepath.Join(tree, name)))
			if err := os.Symlink(target, filepath.Join(tree, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name      string
		setup     []layout
		recursive bool
		want      []string // relative to the tree
		wantErr   string   // an input error containing this
	}{
		{name: "file link outside", setup: []layout{file("a.yaml"), link("$OUT/secret.yaml", "b.yaml")},
			wantErr: "b.yaml: symbolic link to $OUT/secret.yaml, which is outside $TREE; refusing to follow it"},
		{name: "relative file link outside", setup: []layout{link("../out/secret.yaml", "b.yaml")},
			wantErr: "which is outside"},
		{name: "link chain that ends outside", setup: []layout{link("c.yaml", "b.yaml"), link("$OUT/secret.yaml", "c.yaml")},
			wantErr: "which is outside"},
		{name: "directory link outside", recursive: true, setup: []layout{file("a.yaml"), link("$OUT", "sub/more")},
			wantErr: "sub/more: symbolic link to $OUT, which is outside"},
		{name: "directory link outside, not recursive", setup: []layout{file("a.yaml"), link("$OUT", "more")},
			want: []string{"a.yaml"}},
		{name: "link outside with another extension is not read", setup: []layout{file("a.yaml"), link("$OUT/secret.yaml", "notes.txt")},
			want: []string{"a.yaml"}},
		{name: "file link inside", setup: []layout{file("sub/a.yaml"), link("sub/a.yaml", "b.yaml"), link("$TREE/sub/a.yaml", "c.yml")},
			want: []string{"b.yaml", "c.yml"}},
		{name: "directory link to an ancestor", recursive: true, setup: []layout{file("a.yaml"), file("sub/b.yaml"), link("..", "sub/up"), link("$TREE", "sub/root")},
			want: []string{"a.yaml", "sub/b.yaml"}},
		{name: "link loop", setup: []layout{link("y.yaml", "x.yaml"), link("x.yaml", "y.yaml")},
			wantErr: "x.yaml: symbolic link cannot be resolved: EvalSymlinks: too many links"},
		{name: "dangling link", setup: []layout{link("gone.yaml", "x.yaml")},
			wantErr: "x.yaml: symbolic link cannot be resolved: no such file or directory"},
		{name: "fifo", setup: []layout{func(t *testing.T, tree, _ string) {
			if err := syscall.Mkfifo(filepath.Join(tree, "pipe.yaml"), 0o600); err != nil {
				t.Fatal(err)
			}
		}}, wantErr: "pipe.yaml: not a regular file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			tree, outside := filepath.Join(base, "tree"), filepath.Join(base, "out")
			mkdir(t, tree)
			mkdir(t, outside)
			write(t, filepath.Join(outside, "secret.yaml"))
			for _, s := range tc.setup {
				s(t, tree, outside)
			}
			got, err := expandWithin(t, tree, tc.recursive)
			if tc.wantErr != "" {
				want := strings.NewReplacer("$TREE", tree, "$OUT", outside).Replace(tc.wantErr)
				var in *inputError
				if !errors.As(err, &in) || !strings.Contains(err.Error(), want) {
					t.Fatalf("expand = %v, %v; want an input error containing %q", got, err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var rel []string
			for _, g := range got {
				r, _ := filepath.Rel(tree, g)
				rel = append(rel, r)
			}
			if !slices.Equal(rel, tc.want) {
				t.Fatalf("expand = %v, want %v", rel, tc.want)
			}
		})
	}
}

// The tree may be named through a link or a relative path; links inside it
// are judged against where it really is.
func TestExpandRootSpelling(t *testing.T) {
	base := t.TempDir()
	tree := filepath.Join(base, "tree")
	write(t, filepath.Join(tree, "sub", "a.yaml"))
	if err := os.Symlink("sub/a.yaml", filepath.Join(tree, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(tree, filepath.Join(base, "alias")); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{filepath.Join(base, "alias"), "tree", "."} {
		t.Run(root, func(t *testing.T) {
			dir := base
			if root == "." {
				dir = tree
			}
			t.Chdir(dir)
			got, err := expandWithin(t, root, true)
			if err != nil || len(got) != 2 {
				t.Fatalf("expand(%s) = %v, %v; want b.yaml and sub/a.yaml", root, got, err)
			}
		})
	}
}

// Through the CLI: a link out of the tree is a usage error (exit 2) that
// names the link, and the file behind it is not read.
func TestSymlinkOutOfTreeRefused(t *testing.T) {
	base := t.TempDir()
	tree := filepath.Join(base, "tree")
	write(t, filepath.Join(tree, "a.yaml"))
	secret := filepath.Join(base, "secret.yaml")
	write(t, secret)
	if err := os.Symlink(secret, filepath.Join(tree, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"validate", "-f", tree}, {"render", "-f", tree, "-R"}, {"policy", "check", "-f", tree}, {"diff", "-f", tree},
	} {
		t.Run(args[0], func(t *testing.T) {
			out, stderr, code := runCLI(t, "", args...)
			if code != exitUsage || !strings.Contains(stderr, filepath.Join(tree, "b.yaml")+": symbolic link to "+secret) {
				t.Fatalf("exit %d, stderr %q; want exit 2 naming the link", code, stderr)
			}
			if strings.Contains(out, "secret") {
				t.Fatalf("the file outside the tree was read: %s", out)
			}
		})
	}
}

// expandWithin fails the test instead of hanging if expand does not return.
func expandWithin(t *testing.T, root string, recursive bool) ([]string, error) {
	t.Helper()
	type result struct {
		files []string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		files, err := expand(root, recursive)
		done <- result{files, err}
	}()
	select {
	case r := <-done:
		return r.files, r.err
	case <-time.After(10 * time.Second):
		t.Fatal("expand did not return within 10s")
		return nil, nil
	}
}

func write(t *testing.T, p string) {
	t.Helper()
	mkdir(t, filepath.Dir(p))
	name := strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))
	if err := os.WriteFile(p, []byte(strings.Replace(configMap, "%s", name, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}
