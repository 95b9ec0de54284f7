package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

const cpUsage = `Usage:
  kubectl-sandbox cp [flags] LOCAL CLAIM|SANDBOX:[NAME]   upload a file
  kubectl-sandbox cp [flags] CLAIM|SANDBOX:PATH LOCAL     download a file

Copies one file into or out of a sandbox through its runtime (the Go SDK).
Uploads go under the runtime's base directory, to NAME (a relative path;
missing directories are made), or to LOCAL's own name when NAME is empty.
PATH is relative to the base directory, or absolute inside it. LOCAL "-" is
stdin or stdout; a LOCAL directory receives the file under its own name.

Flags:
`

// runCp is "kubectl-sandbox cp".
func runCp(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kubectl-sandbox cp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { _, _ = fmt.Fprint(stderr, cpUsage); fs.PrintDefaults() }
	var f sandboxFlags
	f.bind(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(pos) != 2 {
		_, _ = fmt.Fprintln(stderr, "kubectl-sandbox cp: want LOCAL SANDBOX:NAME or SANDBOX:PATH LOCAL")
		return exitUsage
	}
	srcName, srcPath, srcRemote := remote(pos[0])
	dstName, dstPath, dstRemote := remote(pos[1])
	var name string
	var do func(ctx context.Context, sb sandboxFiles) error
	switch {
	case srcRemote == dstRemote:
		_, _ = fmt.Fprintln(stderr, "kubectl-sandbox cp: want exactly one of the two as SANDBOX:PATH (a name, a colon, a path)")
		return exitUsage
	case dstRemote:
		name = dstName
		target, err := uploadName(pos[0], dstPath)
		if err != nil {
			return sandboxError(stderr, "cp", err)
		}
		do = func(ctx context.Context, sb sandboxFiles) error { return upload(ctx, sb, pos[0], target, stdin) }
	default:
		name = srcName
		do = func(ctx context.Context, sb sandboxFiles) error { return download(ctx, sb, srcPath, pos[1], stdout) }
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sb, err := openSandbox(ctx, &f, name)
	if err != nil {
		return sandboxError(stderr, "cp", err)
	}
	defer func() { _ = sb.Close(context.WithoutCancel(ctx)) }()
	if err := do(ctx, sb); err != nil {
		return sandboxError(stderr, "cp", err)
	}
	return exitOK
}

// sandboxFiles is what cp uses of a *client.Sandbox.
type sandboxFiles interface {
	Write(ctx context.Context, name string, r io.Reader) error
	Read(ctx context.Context, path string) (io.ReadCloser, error)
}

// remote splits "name:path"; a local path may hold a colon only after a
// slash (./a:b), as with kubectl cp.
func remote(arg string) (name, p string, ok bool) {
	i := strings.IndexByte(arg, ':')
	if i <= 0 || strings.ContainsAny(arg[:i], `/\`) {
		return "", "", false
	}
	return arg[:i], arg[i+1:], true
}

// uploadName is the file name an upload is stored as.
func uploadName(local, remotePath string) (string, error) {
	switch strings.TrimSuffix(remotePath, "/") {
	case "", ".":
		if local == "-" {
			return "", &inputError{"cp from stdin: give the file name, as SANDBOX:NAME"}
		}
		return filepath.Base(local), nil
	}
	if strings.HasSuffix(remotePath, "/") {
		// A directory: the file keeps its own name in it.
		if local == "-" {
			return "", &inputError{"cp from stdin: give the file name, as SANDBOX:DIR/NAME"}
		}
		return strings.TrimPrefix(remotePath, "/") + filepath.Base(local), nil
	}
	return strings.TrimPrefix(remotePath, "/"), nil
}

func upload(ctx context.Context, sb sandboxFiles, local, name string, stdin io.Reader) error {
	if local == "-" {
		return sb.Write(ctx, name, stdin)
	}
	f, err := os.Open(local)
	if err != nil {
		return &inputError{err.Error()}
	}
	defer func() { _ = f.Close() }()
	if fi, err := f.Stat(); err != nil || fi.IsDir() {
		return &inputError{fmt.Sprintf("%s: not a file (cp copies one file)", local)}
	}
	return sb.Write(ctx, name, f)
}

func download(ctx context.Context, sb sandboxFiles, remotePath, local string, stdout io.Writer) (err error) {
	if remotePath == "" {
		return &inputError{"cp: give the PATH to copy, as SANDBOX:PATH"}
	}
	if local != "-" {
		if fi, err := os.Stat(local); err == nil && fi.IsDir() {
			local = filepath.Join(local, path.Base(remotePath))
		}
	}
	rc, err := sb.Read(ctx, remotePath)
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	if local == "-" {
		_, err = io.Copy(stdout, rc)
		return err
	}
	out, err := os.Create(local)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(local) // no half-copied file left behind
		}
	}()
	if _, err = io.Copy(out, rc); err != nil {
		return fmt.Errorf("copying %s: %w", remotePath, err)
	}
	return nil
}
