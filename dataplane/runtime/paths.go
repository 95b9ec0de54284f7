package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentsandbox/reconciler/dataplane/shlex"
)

// ErrAccessDenied is a path that resolves outside the base directory. The
// legacy protocol answers it with upstream's 403 {"message": "Access
// denied"}, sandboxd with 403 PERMISSION_DENIED.
var ErrAccessDenied = errors.New("access denied")

// errAccessDenied is the package's short name for ErrAccessDenied.
var errAccessDenied = ErrAccessDenied

// maxSymlinkHops bounds symlink chains, as the kernel does (ELOOP).
const maxSymlinkHops = 40

// resolve maps a path from a request to a real path inside the base
// directory, the way upstream's get_safe_path does: leading slashes are
// dropped (so "/etc/passwd" means <base>/etc/passwd), the result is joined to
// the base and made real (every symlink resolved, as far as the path exists),
// and it must be the base or lie under it. A symlink inside the base that
// points outside it, dangling or not, is refused; so are ".." components that
// climb out.
//
// The check is made when the request arrives; it is not a security boundary
// against the sandbox's own processes, which run with the runtime's rights
// and could move things in between (see the package documentation).
func (h *handler) resolve(raw string) (string, error) {
	return Resolve(h.opts.BaseDir, raw)
}

// Resolve is the confinement every protocol of the runtime shares (the
// legacy one here, sandboxd in dataplane/sandboxd): it maps raw, a path
// from a request, to a real path inside baseDir (an absolute directory),
// or fails with ErrAccessDenied when it leaves it. See handler.resolve.
func Resolve(baseDir, raw string) (string, error) {
	if strings.IndexByte(raw, 0) >= 0 {
		return "", errAccessDenied
	}
	base, err := filepath.EvalSymlinks(baseDir)
	if err != nil {
		return "", fmt.Errorf("base directory: %w", err)
	}
	joined := filepath.Join(baseDir, strings.TrimLeft(raw, "/"))
	if !within(filepath.Clean(baseDir), joined) {
		return "", errAccessDenied
	}
	real, err := realpath(joined)
	if err != nil {
		return "", err
	}
	if !within(base, real) {
		return "", errAccessDenied
	}
	return real, nil
}

// within reports whether p is dir or under it; both are clean and absolute.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, "../"))
}

// realpath resolves every symlink in the clean absolute path p, one
// component at a time, as far as p exists, and appends the rest unchanged
// (Python's os.path.realpath in its default, non-strict mode). A dangling
// symlink is followed to where it points, so that creating a file through it
// cannot land outside the base directory. Chains longer than maxSymlinkHops
// fail with ELOOP.
func realpath(p string) (string, error) {
	resolved := "/"
	rest := strings.Split(strings.TrimPrefix(p, "/"), "/")
	hops := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			continue
		}
		next := filepath.Join(resolved, c)
		fi, err := os.Lstat(next)
		if notExist(err) {
			return filepath.Join(append([]string{next}, rest...)...), nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = next
			continue
		}
		if hops++; hops > maxSymlinkHops {
			return "", &fs.PathError{Op: "resolve", Path: p, Err: syscall.ELOOP}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			resolved = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return resolved, nil
}

// IsNotExist is true for errors that mean "this path is not there": a
// missing entry, or a file where a directory was expected.
func IsNotExist(err error) bool { return notExist(err) }

// notExist is true for errors that mean "this path is not there": a missing
// entry, or a file where a directory was expected.
func notExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// Split splits a command line as upstream's runtime does (Python's
// shlex.split); see package shlex.
func Split(s string) ([]string, error) { return shlex.Split(s) }
