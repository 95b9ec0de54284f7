package docs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const page = "Intro.\n\n" +
	"<!-- docs-test: run; timeout: 5s; expect: hi -->\n" +
	"```sh\necho hi\n```\n\n" +
	"- a list item:\n\n" +
	"  <!-- docs-test: skip: needs Docker -->\n" +
	"  ```bash\n  docker ps\n    indented more\n  ```\n\n" +
	"```go\nfunc main() {}\n```\n" +
	"<!-- docs-test: run; needs: node npm -->\n" +
	"```console\nnode -v\n```\n"

func TestParse(t *testing.T) {
	blocks, err := Parse("p.md", page)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 3 {
		t.Fatalf("got %d blocks, want 3: %+v", len(blocks), blocks)
	}
	run, skip, needs := blocks[0], blocks[1], blocks[2]
	if !run.Run || run.Timeout != 5*time.Second || run.Text != "echo hi\n" || run.Line != 4 || len(run.Expect) != 1 || run.Expect[0] != "hi" {
		t.Errorf("run block: %+v", run)
	}
	if skip.Run || skip.Reason != "needs Docker" || skip.Text != "docker ps\n  indented more\n" {
		t.Errorf("skip block: %+v", skip)
	}
	if !needs.Run || needs.Timeout != DefaultTimeout || strings.Join(needs.Needs, ",") != "node,npm" {
		t.Errorf("needs block: %+v", needs)
	}
}

// TestParseRefuses: each way a page can break the rule is an error that
// names the line.
func TestParseRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ md, want string }{
		"unmarked shell block": {"text\n```sh\nls\n```\n", "p.md:2: shell block without"},
		"skip without reason":  {"<!-- docs-test: skip -->\n```sh\nls\n```\n", "p.md:1: skip without a reason"},
		"skip, empty reason":   {"<!-- docs-test: skip:  -->\n```sh\nls\n```\n", "skip without a reason"},
		"unknown mode":         {"<!-- docs-test: maybe -->\n```sh\nls\n```\n", "neither run nor skip"},
		"unknown option":       {"<!-- docs-test: run; retries: 3 -->\n```sh\nls\n```\n", "unknown option"},
		"bad timeout":          {"<!-- docs-test: run; timeout: soon -->\n```sh\nls\n```\n", "not a positive duration"},
		"marker before text":   {"<!-- docs-test: run -->\nprose\n```sh\nls\n```\n", "p.md:1: marker not followed"},
		"marker at the end":    {"<!-- docs-test: run -->\n", "marker not followed"},
		"marker on go block":   {"<!-- docs-test: run -->\n```go\nx\n```\n", "not a shell block"},
		"unclosed fence":       {"<!-- docs-test: run -->\n```sh\nls\n", "never closed"},
	} {
		_, err := Parse("p.md", tc.md)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", name, err, tc.want)
		}
	}
}

func session(t *testing.T) *Session {
	t.Helper()
	s := &Session{Dir: t.TempDir(), Env: os.Environ(), Replace: strings.NewReplacer("127.0.0.1:8080", "127.0.0.1:18080")}
	t.Cleanup(s.Close)
	return s
}

// TestRunFails proves a broken block fails the test, with its output shown:
// a failing command in the middle, a pipeline's failure, a missing
// expected string and a block past its timeout.
func TestRunFails(t *testing.T) {
	for name, tc := range map[string]struct {
		text   string
		expect []string
		want   []string
	}{
		"failing command":  {"echo before\nfalse\necho after\n", nil, []string{"exit code 1", "before", "--- script ---"}},
		"failing pipeline": {"ls /no/such/dir | cat\n", nil, []string{"exit code 2", "No such file"}},
		"missing output":   {"echo hello\n", []string{"goodbye"}, []string{`output lacks "goodbye"`, "hello"}},
		"timeout":          {"echo started; sleep 30\n", nil, []string{"timed out after 300ms", "started"}},
	} {
		b := Block{Page: "p.md", Line: 7, Text: tc.text, Run: true, Timeout: 300 * time.Millisecond, Expect: tc.expect}
		if name != "timeout" {
			b.Timeout = 10 * time.Second
		}
		_, err := session(t).Run(context.Background(), b)
		if err == nil {
			t.Errorf("%s: the block passed", name)
			continue
		}
		for _, w := range append(tc.want, "p.md:7") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", name, err, w)
			}
		}
	}
}

// TestRunPasses: a good block passes, sees its substitutions, runs in Dir,
// and its background processes outlive it until the session closes.
func TestRunPasses(t *testing.T) {
	s := session(t)
	res, err := s.Run(context.Background(), Block{Page: "p.md", Line: 1, Run: true, Timeout: 10 * time.Second,
		Text: "echo http://127.0.0.1:8080/; pwd; sleep 60 & echo $! > bg.pid\n", Expect: []string{"127.0.0.1:18080"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Output, s.Dir) {
		t.Errorf("output %q does not show the block ran in %s", res.Output, s.Dir)
	}
	if res.Took > 5*time.Second {
		t.Errorf("the block waited for its background process (%s)", res.Took)
	}
	pid, err := os.ReadFile(filepath.Join(s.Dir, "bg.pid"))
	if err != nil {
		t.Fatal(err)
	}
	proc := "/proc/" + strings.TrimSpace(string(pid))
	if _, err := os.Stat(proc); err != nil {
		t.Fatalf("the background process is gone before Close: %v", err)
	}
	s.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := os.ReadFile(proc + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the background process outlived Close")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRepositoryPagesFollowTheRule parses README.md and docs/*.md: every
// shell block is marked, every skip says why.
func TestRepositoryPagesFollowTheRule(t *testing.T) {
	root := repoRoot(t)
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	runs, skips := 0, 0
	for _, p := range pages {
		blocks, err := ParseFile(root, p)
		if err != nil {
			t.Error(err)
		}
		for _, b := range blocks {
			if b.Run {
				runs++
			} else {
				skips++
			}
		}
	}
	t.Logf("%d pages: %d blocks run, %d skipped with a reason", len(pages), runs, skips)
}
