package e2b

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentsandbox/reconciler/tests"
)

// Version is the e2b release package.json pins (exactly: the lockfile holds
// its integrity hash).
const Version = "2.51.0"

// minNode is the oldest Node.js the pinned SDK supports (its engines field).
var minNode = [3]int{20, 18, 1}

// Dir is the Node project's directory in the repository.
func Dir() string { return filepath.Join(tests.RepoRoot(), "tests", "e2b") }

// Available reports why the SDK cannot run here: node or npm missing from
// PATH, or a Node.js older than the SDK supports. nil means it can.
func Available() error {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not on PATH (the e2b SDK test needs Node.js >= %d.%d.%d and npm)", tool, minNode[0], minNode[1], minNode[2])
		}
	}
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		return fmt.Errorf("running node --version: %w", err)
	}
	v, err := parseNodeVersion(string(out))
	if err != nil {
		return err
	}
	if less(v, minNode) {
		return fmt.Errorf("node %s is older than %d.%d.%d, the oldest the e2b SDK supports", strings.TrimSpace(string(out)), minNode[0], minNode[1], minNode[2])
	}
	return nil
}

func parseNodeVersion(s string) ([3]int, error) {
	var v [3]int
	parts := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(s), "v"), ".", 3)
	if len(parts) != 3 {
		return v, fmt.Errorf("node --version printed %q: want vMAJOR.MINOR.PATCH", strings.TrimSpace(s))
	}
	for i, p := range parts {
		p, _, _ = strings.Cut(p, "-")
		n, err := strconv.Atoi(p)
		if err != nil {
			return v, fmt.Errorf("node --version printed %q: %w", strings.TrimSpace(s), err)
		}
		v[i] = n
	}
	return v, nil
}

func less(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// projectFiles are copied from Dir into the installed project: the
// manifests npm ci reads and the scripts Run starts.
var projectFiles = []string{"package.json", "package-lock.json", "sdk.mjs", "bench.mjs", "hello.mjs"}

// Install makes the locked dependencies available and returns the directory
// to Run scripts in: .work/e2b-node/<first 16 hex digits of the lockfile's
// SHA-256>/, installed with `npm ci` the first time (into a temporary
// directory renamed into place, so concurrent callers never see half an
// install) and reused while the lockfile is unchanged. The scripts are
// copied in on every call, so edits to them need no reinstall.
func Install(ctx context.Context) (string, error) {
	lock, err := os.ReadFile(filepath.Join(Dir(), "package-lock.json"))
	if err != nil {
		return "", fmt.Errorf("reading the lockfile: %w", err)
	}
	sum := sha256.Sum256(lock)
	root := filepath.Join(tests.RepoRoot(), ".work", "e2b-node")
	dir := filepath.Join(root, hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "e2b", "package.json")); err != nil {
		if err := os.MkdirAll(root, 0o755); err != nil {
			return "", err
		}
		tmp, err := os.MkdirTemp(root, "install-")
		if err != nil {
			return "", err
		}
		defer func() { _ = os.RemoveAll(tmp) }()
		if err := copyProject(tmp); err != nil {
			return "", err
		}
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("npm ci in %s: %w\n%s", tmp, err, out)
		}
		if err := os.Rename(tmp, dir); err != nil {
			// Another caller installed the same lockfile first: use it.
			if _, serr := os.Stat(filepath.Join(dir, "node_modules", "e2b", "package.json")); serr != nil {
				return "", fmt.Errorf("moving the install into place: %w", err)
			}
		}
	}
	if err := copyProject(dir); err != nil {
		return "", err
	}
	return dir, nil
}

func copyProject(dst string) error {
	for _, name := range projectFiles {
		b, err := os.ReadFile(filepath.Join(Dir(), name))
		if errors.Is(err, os.ErrNotExist) && strings.HasSuffix(name, ".mjs") {
			continue
		}
		if err != nil {
			return fmt.Errorf("copying the Node project: %w", err)
		}
		// Write and rename, so a script running from dst is never cut.
		tmp := filepath.Join(dst, "."+name+".tmp")
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return fmt.Errorf("copying the Node project: %w", err)
		}
		if err := os.Rename(tmp, filepath.Join(dst, name)); err != nil {
			return fmt.Errorf("copying the Node project: %w", err)
		}
	}
	return nil
}

// Env is what a script is given: the SDK's three settings, nothing else of
// ours.
type Env struct {
	APIURL     string // E2B_API_URL: the control plane
	SandboxURL string // E2B_SANDBOX_URL: the data plane
	APIKey     string // E2B_API_KEY: the credential
}

// Run runs `node <script> args...` in dir (from Install) with env and
// returns its standard output and error. The process environment is PATH
// and HOME plus env's three variables, so no E2B_* setting or credential of
// the caller leaks in. A non-zero exit is returned as an error along with
// the output.
func Run(ctx context.Context, dir string, env Env, script string, args ...string) (stdout, stderr []byte, err error) {
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"E2B_API_URL=" + env.APIURL,
		"E2B_SANDBOX_URL=" + env.SandboxURL,
		"E2B_API_KEY=" + env.APIKey,
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if err != nil {
		err = fmt.Errorf("node %s: %w", script, err)
	}
	return out.Bytes(), errOut.Bytes(), err
}
