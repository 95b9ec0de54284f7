package tests

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// BuildRuntime builds cmd/sandbox-runtime into dir and returns its path.
func BuildRuntime(dir string) (string, error) {
	bin := filepath.Join(dir, "sandbox-runtime")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/sandbox-runtime")
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the runtime: %w\n%s", err, out)
	}
	return bin, nil
}
