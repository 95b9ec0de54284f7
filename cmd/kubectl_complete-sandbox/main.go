package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

func main() {
	plugin, err := pluginPath()
	if err != nil {
		_, _ = fmt.Fprintf(os.Stderr, "kubectl_complete-sandbox: %v\n", err)
		os.Exit(1)
	}
	cmd := exec.Command(plugin, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			os.Exit(ee.ExitCode())
		}
		_, _ = fmt.Fprintf(os.Stderr, "kubectl_complete-sandbox: %v\n", err)
		os.Exit(1)
	}
}

// pluginPath is kubectl-sandbox in this program's directory (as make cli and
// krew install them), else on PATH.
func pluginPath() (string, error) {
	name := "kubectl-sandbox"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	if self, err := os.Executable(); err == nil {
		if self, err = filepath.EvalSymlinks(self); err == nil {
			p := filepath.Join(filepath.Dir(self), name)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("kubectl-sandbox is neither next to this program nor on PATH: %w", err)
	}
	return p, nil
}
