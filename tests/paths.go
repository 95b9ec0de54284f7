package tests

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// BinEnv names the environment variable that points at the directory holding
// the binaries built by `make tools` (kube-apiserver, etcd, kwokctl, ...).
const BinEnv = "AGENT_SANDBOX_BIN"

// RepoRoot returns the repository root (the directory of the main go.mod).
func RepoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("tests: cannot locate the repository root")
	}
	return filepath.Dir(filepath.Dir(file))
}

// CRDDir returns the directory of the generated CustomResourceDefinitions.
func CRDDir() string { return filepath.Join(RepoRoot(), "config", "crd", "bases") }

// BinDir returns the directory of the test binaries: $AGENT_SANDBOX_BIN, else
// $KUBEBUILDER_ASSETS, else bin/ in the repository.
func BinDir() string {
	for _, env := range []string{BinEnv, "KUBEBUILDER_ASSETS"} {
		if d := os.Getenv(env); d != "" {
			return d
		}
	}
	return filepath.Join(RepoRoot(), "bin")
}

// Binary returns the path of a binary in BinDir, or an error that tells the
// user how to build it.
func Binary(name string) (string, error) {
	p := filepath.Join(BinDir(), name)
	st, err := os.Stat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("%s not found in %s: run 'make tools' (or 'make test', which builds it) first", name, BinDir())
	case err != nil:
		return "", fmt.Errorf("checking %s: %w", p, err)
	case st.IsDir() || st.Mode()&0o111 == 0:
		return "", fmt.Errorf("%s is not an executable file", p)
	}
	return p, nil
}
