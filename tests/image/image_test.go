package image

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentsandbox/reconciler/tests"
)

func readDockerfile(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(tests.RepoRoot(), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// build runs the build stage of a Dockerfile against the repository as the
// build context, and returns the result and the go build output.
func build(t *testing.T, dockerfile []byte) (*Dockerfile, *Result, string, error) {
	t.Helper()
	df, err := Parse(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var log bytes.Buffer
	res, err := BuildStage(ctx, tests.RepoRoot(), df, "build", t.TempDir(), &log)
	return df, res, log.String(), err
}

// TestDockerfileBuilds is `docker build` without Docker: the build stage
// compiles from exactly the files it copies, the final stage copies what it
// built, and the builder's Go is new enough for go.mod.
func TestDockerfileBuilds(t *testing.T) {
	start := time.Now()
	df, res, log, err := build(t, readDockerfile(t))
	if err != nil {
		t.Fatalf("the Dockerfile's build stage does not compile from what it copies: %v\n%s", err, log)
	}
	t.Logf("built %v from %d copied files in %s; not run: %q", res.Outputs, len(res.Copied), time.Since(start).Round(time.Second), res.Skipped)
	if err := CheckFinal(df, "build", res.Outputs); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(tests.RepoRoot(), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckGoVersion(df, "build", gomod); err != nil {
		t.Fatal(err)
	}
}

// The check fails when the Dockerfile leaves out a package the controller
// imports, as `docker build` would.
func TestDockerfileMissingPackageFails(t *testing.T) {
	const line = "COPY policy/ policy/\n"
	data := readDockerfile(t)
	if !bytes.Contains(data, []byte(line)) {
		t.Fatalf("the Dockerfile has no %q line to leave out", strings.TrimSpace(line))
	}
	_, _, log, err := build(t, bytes.Replace(data, []byte(line), nil, 1))
	if err == nil {
		t.Fatal("the build stage compiled without policy/")
	}
	if !strings.Contains(log, "reconciler/policy") {
		t.Fatalf("go build failed for another reason than the missing policy package: %v\n%s", err, log)
	}
}
