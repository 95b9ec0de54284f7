package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/agentsandbox/reconciler/dataplane/runtime"
)

// tokenFDEnv names the descriptor a runtime started again by hideToken
// reads its token from.
const tokenFDEnv = "SANDBOX_RUNTIME_TOKEN_FD"

// hideToken starts the runtime again, in the same process, without
// $SANDBOX_RUNTIME_TOKEN in its environment when its token came that way,
// and hands the token over on a pipe (handedToken). The environment a
// process started with stays readable in /proc/<pid>/environ to every
// process of its user, the commands it runs among them, and os.Unsetenv
// changes only Go's copy of it. It returns only when there was nothing to
// hide, or the exec failed (err).
func hideToken() error {
	token, ok := os.LookupEnv(runtime.TokenEnv)
	if !ok || goruntime.GOOS != "linux" {
		return nil
	}
	if _, handed := os.LookupEnv(tokenFDEnv); handed {
		return fmt.Errorf("$%s and $%s are both set", runtime.TokenEnv, tokenFDEnv)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }()
	// A token fits in the pipe's buffer: written before the exec, read
	// after it.
	_, err = io.WriteString(w, token)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	fd := r.Fd()
	// The read end is kept open across the exec (os.Pipe closes it there).
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETFD, 0); errno != 0 {
		return errno
	}
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); name != runtime.TokenEnv {
			env = append(env, kv)
		}
	}
	env = append(env, tokenFDEnv+"="+strconv.Itoa(int(fd)))
	err = syscall.Exec(exe, os.Args, env)
	goruntime.KeepAlive(r)
	return err
}

// handedToken reads the token hideToken handed over, if it did (ok), and
// closes its descriptor.
func handedToken() (token string, ok bool, err error) {
	v, ok := os.LookupEnv(tokenFDEnv)
	if !ok {
		return "", false, nil
	}
	_ = os.Unsetenv(tokenFDEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return "", true, fmt.Errorf("$%s=%q is not a descriptor", tokenFDEnv, v)
	}
	f := os.NewFile(uintptr(fd), "runtime-token")
	if f == nil {
		return "", true, errors.New("no runtime token descriptor")
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	return string(b), true, err
}
