package docs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentsandbox/reconciler/tests"
)

// binaries are what `make run` builds into bin/ (next to the cluster's).
var binaries = []string{"./cmd/sandbox-controller", "./cmd/kubectl-sandbox", "./cmd/kubectl_complete-sandbox",
	"./cmd/sandbox-runtime", "./cmd/sandbox-router"}

// TestDocs runs every run block of README.md and docs/*.md, page by page,
// against one local cluster started as `make run` starts it.
// DOCS_PAGES="README.md docs/sdks.md" runs only those pages; DOCS_KEEP=1
// keeps the directory the blocks ran in (and the cluster's logs).
func TestDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local cluster")
	}
	began := time.Now()
	root := checkoutLike(t)
	otlp, err := tests.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	env := blockEnv(root)
	up := exec.Command(filepath.Join(root, "bin", "kubectl-sandbox"), "up", "--name", "agent-sandbox",
		"--workdir", filepath.Join(root, ".work", "kwok"), "--bin-dir", filepath.Join(root, "bin"),
		"--controller", filepath.Join(root, "bin", "sandbox-controller"), "--runtime", filepath.Join(root, "bin", "sandbox-runtime"),
		"--router", filepath.Join(root, "bin", "sandbox-router"), "--samples", "config/samples")
	// As `OTEL_EXPORTER_OTLP_ENDPOINT=... make run` (docs/tracing.md): the
	// controller, the router and the runtimes export to the page's collector.
	up.Dir, up.Env = root, append(env, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+otlp)
	defer func() {
		down := exec.Command(filepath.Join(root, "bin", "kubectl-sandbox"), "down", "--name", "agent-sandbox",
			"--workdir", filepath.Join(root, ".work", "kwok"), "--bin-dir", filepath.Join(root, "bin"))
		down.Dir = root
		if out, err := down.CombinedOutput(); err != nil {
			t.Errorf("kubectl-sandbox down: %v\n%s", err, out)
		}
	}()
	out, err := up.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl-sandbox up: %v\n%s", err, out)
	}
	printed := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		for _, prefix := range []string{"export KUBECONFIG=", "Its metrics: ", "router: ", "router metrics: "} {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				printed[prefix] = v
			}
		}
	}
	if len(printed) != 4 {
		t.Fatalf("kubectl-sandbox up did not print the kubeconfig, the metrics and the router:\n%s", out)
	}
	t.Logf("local cluster up in %s", time.Since(began).Round(time.Second))
	hostOf := func(url string) string {
		return strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/metrics")
	}
	replace := strings.NewReplacer(
		"http://127.0.0.1:8080", printed["router: "],
		"127.0.0.1:<port>", hostOf(printed["Its metrics: "]),
		"127.0.0.1:<router-metrics-port>", hostOf(printed["router metrics: "]),
		"127.0.0.1:4318", otlp,
	)
	env = append(env, "KUBECONFIG="+printed["export KUBECONFIG="])

	// What `make run` has ready when a reader starts: the samples served;
	// and what the examples name: namespaces team-a and team-b, a folder
	// manifests/ of the reader's own (the samples).
	setup := &Session{Dir: root, Env: env}
	if _, err := setup.Run(context.Background(), Block{Page: "(setup)", Run: true, Timeout: 3 * time.Minute, Text: `
kubectl wait --for=condition=Ready sandbox/sample-sandbox sandboxclaim/sample-claim --timeout=3m
kubectl wait --for=jsonpath='{.status.readyReplicas}'=2 sandboxwarmpool/python-pool --timeout=3m
kubectl create namespace team-a
kubectl create namespace team-b
cp -r config/samples manifests
`}); err != nil {
		t.Fatal(err)
	}
	setup.Close()

	pages, err := Pages(tests.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	only := strings.Fields(os.Getenv("DOCS_PAGES"))
	for _, page := range pages {
		if len(only) > 0 && !slices.Contains(only, page) {
			continue
		}
		blocks, err := ParseFile(tests.RepoRoot(), page)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(page, func(t *testing.T) {
			s := &Session{Dir: root, Env: env, Replace: replace}
			defer s.Close()
			for _, b := range blocks {
				if !b.Run {
					continue
				}
				if missing := Missing(b); len(missing) > 0 {
					t.Logf("%s: skipped: %s not on PATH", b.Where(), strings.Join(missing, ", "))
					continue
				}
				res, err := s.Run(context.Background(), b)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: ok in %s", b.Where(), res.Took.Round(10*time.Millisecond))
			}
		})
	}
	t.Logf("every page's commands ran in %s (cluster included)", time.Since(began).Round(time.Second))
}

// checkoutLike returns a directory that looks like the checkout to a
// reader's commands: links to the repository's top-level entries, a bin/
// with the binaries `make run` builds and the cluster's, and room for
// .work/ and whatever the commands write.
func checkoutLike(t *testing.T) string {
	t.Helper()
	repo := tests.RepoRoot()
	root, err := os.MkdirTemp("", "agent-sandbox-docs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if os.Getenv("DOCS_KEEP") == "" {
			_ = os.RemoveAll(root)
		}
	})
	entries, err := os.ReadDir(repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch e.Name() {
		case ".git", "bin", ".work":
			continue
		}
		if err := os.Symlink(filepath.Join(repo, e.Name()), filepath.Join(root, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(root, "bin")
	build := exec.Command("go", append([]string{"build", "-tags", tests.BuildTags, "-o", bin + "/"}, binaries...)...)
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cluster, err := os.ReadDir(tests.BinDir())
	if err != nil {
		t.Fatalf("the cluster's binaries: %v (run make tools)", err)
	}
	for _, e := range cluster {
		dst := filepath.Join(bin, e.Name())
		if _, err := os.Lstat(dst); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(tests.BinDir(), e.Name()), dst); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// blockEnv is the environment of every block: the caller's, with bin/ first
// on PATH (so `kubectl sandbox` is the plugin just built) and no kubeconfig
// or tracing settings of its own.
func blockEnv(root string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "KUBECONFIG" || name == "PATH" || strings.HasPrefix(name, "OTEL_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, fmt.Sprintf("PATH=%s:%s", filepath.Join(root, "bin"), os.Getenv("PATH")))
}
