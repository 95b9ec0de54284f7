package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Install with Helm":                     "install-with-helm",
		"The E2B API (`--e2b`)":                 "the-e2b-api---e2b",
		"A local cluster: `kubectl sandbox up`": "a-local-cluster-kubectl-sandbox-up",
		"AgentSandboxClaimsSlow":                "agentsandboxclaimsslow",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestBrokenLinksFindsThem: a missing file and a missing heading are
// reported; good links, external ones and links inside code are not.
func TestBrokenLinksFindsThem(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/a.md", "# A\n\n## Two words\n\n## Two words\n")
	write("README.md", "[ok](docs/a.md) [ok](docs/a.md#two-words) [ok](docs/a.md#two-words-1) [ok](#top)\n"+
		"[ext](https://example.com/x) [dir](docs)\n"+
		"[gone](docs/b.md) [nohead](docs/a.md#three)\n\n# Top\n\n```md\n[in code](nowhere.md)\n```\n")
	broken, err := BrokenLinks(root, "README.md")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(broken, "\n")
	if len(broken) != 2 || !strings.Contains(got, "docs/b.md: no such file") || !strings.Contains(got, "docs/a.md#three: no such heading") {
		t.Fatalf("broken links:\n%s", got)
	}
}

// TestLinksResolve: every relative link of README.md and docs/*.md leads
// to a file, and every #fragment to a heading.
func TestLinksResolve(t *testing.T) {
	root := repoRoot(t)
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		broken, err := BrokenLinks(root, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range broken {
			t.Error(b)
		}
	}
}

// TestCitedTestsExist: every test a page names (the security model's
// attacker tests, the reasons of skipped blocks) is a test function of the
// repository.
func TestCitedTestsExist(t *testing.T) {
	root := repoRoot(t)
	defined := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == ".work" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "func Test"); ok {
				name, _, _ := strings.Cut(rest, "(")
				defined["Test"+name] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	cited := 0
	for _, p := range pages {
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range CitedTests(string(data)) {
			cited++
			if !defined[name] {
				t.Errorf("%s cites %s, which no _test.go defines", p, name)
			}
		}
	}
	t.Logf("%d test names cited", cited)
}

func TestCitedTests(t *testing.T) {
	got := strings.Join(CitedTests("`TestA` and TestB (pkg), TestC alone, `TestA` again, `TestMain`"), ",")
	if got != "TestA,TestB,TestMain" {
		t.Errorf("CitedTests = %s", got)
	}
}
