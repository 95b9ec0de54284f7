package envd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"connectrpc.com/connect"

	"github.com/agentsandbox/reconciler/dataplane/runtime"
)

// errRoot is an operation that would act on the sandbox's root itself.
var errRoot = errors.New("the sandbox's root directory cannot be removed or moved")

// clean is raw as an absolute, lexically clean path with the base as "/":
// what the legacy protocol's confinement makes of it ("x", "/x" and
// "/../x" are all "/x").
func clean(raw string) string { return path.Clean("/" + raw) }

// resolve follows raw to a real path inside the base directory (every
// symlink resolved), or fails with runtime.ErrAccessDenied.
func resolve(base, raw string) (string, error) {
	if strings.IndexByte(raw, 0) >= 0 {
		return "", runtime.ErrAccessDenied
	}
	return runtime.Resolve(base, clean(raw))
}

// resolveEntry is raw's entry itself: its directory resolved and confined,
// its last component taken as it is, so that a symlink is the link, never
// what it points to. The root is the base directory itself.
func resolveEntry(base, raw string) (string, error) {
	if strings.IndexByte(raw, 0) >= 0 {
		return "", runtime.ErrAccessDenied
	}
	c := clean(raw)
	if c == "/" {
		return runtime.Resolve(base, "/")
	}
	dir, err := runtime.Resolve(base, path.Dir(c))
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, path.Base(c)), nil
}

// pathError is err, from op on the client's path p, as a Connect error
// with the code the SDK maps: not_found, permission_denied (outside the
// base, or not allowed), already_exists, invalid_argument.
func pathError(op, p string, err error) error {
	msg := fmt.Sprintf("%s %s: %s", op, quote(p), errText(err))
	switch {
	case errors.Is(err, runtime.ErrAccessDenied):
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s %s: the path leaves the sandbox's root", op, quote(p)))
	case errors.Is(err, errRoot):
		return connect.NewError(connect.CodeInvalidArgument, errors.New(msg))
	case runtime.IsNotExist(err):
		return connect.NewError(connect.CodeNotFound, errors.New(msg))
	case errors.Is(err, fs.ErrExist), errors.Is(err, syscall.ENOTEMPTY):
		return connect.NewError(connect.CodeAlreadyExists, errors.New(msg))
	case errors.Is(err, fs.ErrPermission):
		return connect.NewError(connect.CodePermissionDenied, errors.New(msg))
	case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.ENAMETOOLONG),
		errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.EXDEV):
		return connect.NewError(connect.CodeInvalidArgument, errors.New(msg))
	}
	return connect.NewError(connect.CodeInternal, errors.New(msg))
}

// errText is err's message without the Go path prefix (the client's path
// is already in the message, the real one is not its business).
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err.Error()
	}
	return err.Error()
}
