package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

const cpLong = `Copies one file into or out of a sandbox through its runtime (the Go SDK).
Uploads go under the runtime's base directory, to NAME (a relative path;
missing directories are made), or to LOCAL's own name when NAME is empty.
PATH is relative to the base directory, or absolute inside it. LOCAL "-" is
stdin or stdout; a LOCAL directory receives the file under its own name.

  kubectl sandbox cp ./data.csv my-claim:        upload
  kubectl sandbox cp my-claim:results.json .     download`

// cpOptions are cp's parsed flags and arguments.
type cpOptions struct {
	sandbox  sandboxFlags
	src, dst string
}

func (a *app) cpCmd() *cobra.Command {
	var o cpOptions
	cmd := &cobra.Command{
		Use:               "cp LOCAL CLAIM|SANDBOX:[NAME] | CLAIM|SANDBOX:PATH LOCAL",
		Short:             "Copy a file into or out of a sandbox",
		Long:              cpLong,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: a.completeNames(true),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return a.fail(cmd, exitUsage, "want LOCAL SANDBOX:NAME or SANDBOX:PATH LOCAL")
			}
			o.src, o.dst = args[0], args[1]
			o.sandbox.resolve(a)
			if a.stop(cmd, &o) {
				return nil
			}
			return a.runCp(cmd, &o)
		},
	}
	o.sandbox.bind(cmd.Flags())
	return cmd
}

// runCp is "kubectl-sandbox cp".
func (a *app) runCp(cmd *cobra.Command, o *cpOptions) error {
	srcName, srcPath, srcRemote := remote(o.src)
	dstName, dstPath, dstRemote := remote(o.dst)
	var name string
	var do func(ctx context.Context, sb sandboxFiles) error
	switch {
	case srcRemote == dstRemote:
		return a.fail(cmd, exitUsage, "want exactly one of the two as SANDBOX:PATH (a name, a colon, a path)")
	case dstRemote:
		name = dstName
		target, err := uploadName(o.src, dstPath)
		if err != nil {
			return sandboxError(a.stderr, "cp", err)
		}
		do = func(ctx context.Context, sb sandboxFiles) error { return upload(ctx, sb, o.src, target, a.stdin) }
	default:
		name = srcName
		do = func(ctx context.Context, sb sandboxFiles) error { return download(ctx, sb, srcPath, o.dst, a.stdout) }
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sb, err := openSandbox(ctx, &o.sandbox, name)
	if err != nil {
		return sandboxError(a.stderr, "cp", err)
	}
	defer func() { _ = sb.Close(context.WithoutCancel(ctx)) }()
	if err := do(ctx, sb); err != nil {
		return sandboxError(a.stderr, "cp", err)
	}
	return nil
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
