package tests

import (
	"fmt"
	"os/exec"
	"path/filepath"

	"github.com/agentsandbox/reconciler/localcluster"
)

// BuildTags are the build tags the controller is built with (GO_TAGS in
// the Makefile, and the image's build): tests that build it use them.
const BuildTags = "fieldsv1string"

// BuildController builds cmd/sandbox-controller into dir and returns its path.
func BuildController(dir string) (string, error) {
	bin := filepath.Join(dir, "sandbox-controller")
	cmd := exec.Command("go", "build", "-tags", BuildTags, "-o", bin, "./cmd/sandbox-controller")
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the controller: %w\n%s", err, out)
	}
	return bin, nil
}

// Controller is a running controller binary.
type Controller = localcluster.Controller

// StartController runs bin against a kubeconfig with free metrics and
// probe ports plus args, logging to logPath, and waits until it is ready.
func StartController(bin, kubeconfig, logPath string, args ...string) (*Controller, error) {
	return localcluster.StartController(localcluster.ControllerOptions{
		Binary: bin, Kubeconfig: kubeconfig, LogPath: logPath, Args: args,
	})
}
