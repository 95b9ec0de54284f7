package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/agentsandbox/reconciler/dataplane/sandboxd/processpb"
	"github.com/agentsandbox/reconciler/dataplane/shlex"
)

// connectSandboxd sets c up for WithSandboxd: one port-forward to the Pod,
// HTTP to its REST port and gRPC to its ProcessService port over it.
func (s *Sandbox) connectSandboxd(c *conn) error {
	pf, err := newPortForward(s.client.cfg, s.client.core, s.namespace, s.podName, s.uid, SandboxdRESTPort)
	if err != nil {
		return err
	}
	cc, err := grpc.NewClient("passthrough:///"+net.JoinHostPort(s.podName, strconv.Itoa(SandboxdGRPCPort)),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return pf.dialPort(ctx, SandboxdGRPCPort)
		}),
		// An Execute answer carries up to MaxResultSize of each stream.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(2*MaxResultSize+64<<10)))
	if err != nil {
		pf.Close()
		return fmt.Errorf("sandbox %s/%s: sandboxd: %w", s.namespace, s.name, err)
	}
	c.token = ""
	c.base = "http://" + net.JoinHostPort(s.podName, strconv.Itoa(SandboxdRESTPort)) + "/"
	c.http = &http.Client{Transport: pf.transport(), CheckRedirect: noRedirects}
	c.proc = processpb.NewProcessServiceClient(cc)
	c.reach = func(ctx context.Context) error {
		_, err := pf.connection(ctx)
		return err
	}
	c.close = func() {
		_ = cc.Close()
		pf.Close()
	}
	return nil
}

// ProcessService is sandboxd's gRPC ProcessService of a Sandbox opened
// WithSandboxd, for what Run does not offer: Start (streamed output, stdin
// through WriteStdin, a PTY and ResizeTTY) and SendSignal. It fails for
// the legacy protocol, which has none.
func (s *Sandbox) ProcessService() (processpb.ProcessServiceClient, error) {
	if s.conn.proc == nil {
		return nil, fmt.Errorf("sandbox %s/%s: the ProcessService needs the sandboxd transport (WithSandboxd)", s.namespace, s.name)
	}
	return s.conn.proc, nil
}

// runSandboxd is Run over sandboxd: the command is split as the legacy
// runtime splits it (shlex) and run with Execute. As on the legacy
// protocol, a command that cannot be split or started is exit code 1 with
// the reason on stderr, not an error.
func (s *Sandbox) runSandboxd(ctx context.Context, command string) (Result, error) {
	if err := s.open("run"); err != nil {
		return Result{}, err
	}
	argv, err := shlex.Split(command)
	if err == nil && len(argv) == 0 {
		err = errors.New("empty command")
	}
	if err != nil {
		return Result{ExitCode: 1, Stderr: "Failed to execute command: " + err.Error()}, nil
	}
	end := s.began()
	defer end()
	if err := s.reachSandboxd(ctx, "run"); err != nil {
		return Result{}, err
	}
	res, err := s.conn.proc.Execute(ctx, &processpb.ExecuteRequest{Config: &processpb.ProcessConfig{Command: argv}})
	switch status.Code(err) {
	case codes.OK:
		return Result{Stdout: string(res.GetStdout()), Stderr: string(res.GetStderr()), ExitCode: int(res.GetExitCode())}, nil
	case codes.NotFound, codes.PermissionDenied, codes.FailedPrecondition:
		return Result{ExitCode: 1, Stderr: "Failed to execute command: " + status.Convert(err).Message()}, nil
	case codes.DeadlineExceeded:
		if ctx.Err() != nil {
			return Result{}, fmt.Errorf("sandbox %s/%s: run: %w", s.namespace, s.name, ctxError(ctx, err))
		}
		return Result{ExitCode: 1, Stderr: "Failed to execute command: " + status.Convert(err).Message()}, nil
	case codes.ResourceExhausted:
		return Result{}, fmt.Errorf("sandbox %s/%s: run: %w: %w", s.namespace, s.name, ErrTooLarge, err)
	}
	if ctx.Err() != nil {
		return Result{}, fmt.Errorf("sandbox %s/%s: run: %w", s.namespace, s.name, ctxError(ctx, err))
	}
	return Result{}, fmt.Errorf("sandbox %s/%s: run: %w", s.namespace, s.name, err)
}

// reachSandboxd connects the port-forward before a gRPC call, as call does
// for HTTP: its dialer checks that the Pod is still controlled by the
// Sandbox's UID, so a call never reaches a namesake's Pod. A Pod that is
// gone is a Sandbox to wake (suspended, or its Pod replaced) or, when the
// name now stands for another Sandbox, ErrNotFound; the call was not sent.
func (s *Sandbox) reachSandboxd(ctx context.Context, op string) error {
	err := s.conn.reach(ctx)
	if gone := (podGone{}); errors.As(err, &gone) {
		if werr := s.wake(ctx); werr != nil {
			return fmt.Errorf("sandbox %s/%s: %s: %w", s.namespace, s.name, op, werr)
		}
		err = s.conn.reach(ctx)
	}
	if err != nil {
		return fmt.Errorf("sandbox %s/%s: %s: %w", s.namespace, s.name, op, err)
	}
	return nil
}

// open fails once the Sandbox is closed.
func (s *Sandbox) open(op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("sandbox %s/%s: %s: %w", s.namespace, s.name, op, ErrClosed)
	}
	return nil
}

// writeSandboxd is Write over sandboxd: PUT /v1/files/{name} with the raw
// bytes (mode 0644, as the legacy upload stores files).
func (s *Sandbox) writeSandboxd(ctx context.Context, name string, r io.Reader) error {
	length := int64(-1)
	if n, ok := sizeOf(r); ok {
		length = n
	}
	resp, err := s.call(ctx, request{op: "write", method: http.MethodPut, endpoint: "v1/files/" + encodePath(name),
		body: r, length: length, contentType: "application/octet-stream"})
	if err != nil {
		return fmt.Errorf("%w (file %q)", err, name)
	}
	drainClose(resp)
	return nil
}

// isJSON reports whether a /v1/files answer is a directory listing rather
// than a file's bytes.
func isJSON(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "application/json"
}

// readSandboxd is Read over sandboxd: GET /v1/files/{path}. A directory is
// ErrNotFound, as the legacy download answers it.
func (s *Sandbox) readSandboxd(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := s.call(ctx, request{op: "read", method: http.MethodGet, endpoint: "v1/files/" + encodePath(path), idempotent: true})
	if err != nil {
		return nil, fmt.Errorf("%w (path %q)", err, path)
	}
	if isJSON(resp) {
		drainClose(resp)
		return nil, fmt.Errorf("sandbox %s/%s: read %q: a directory: %w", s.namespace, s.name, path, ErrNotFound)
	}
	return resp.Body, nil
}

// listSandboxd is List over sandboxd: GET /v1/files/{path} of a directory.
func (s *Sandbox) listSandboxd(ctx context.Context, path string) ([]FileEntry, error) {
	resp, err := s.call(ctx, request{op: "list", method: http.MethodGet, endpoint: "v1/files/" + encodePath(path), idempotent: true})
	if err != nil {
		return nil, fmt.Errorf("%w (path %q)", err, path)
	}
	defer drainClose(resp)
	if !isJSON(resp) {
		return nil, fmt.Errorf("sandbox %s/%s: list %q: not a directory: %w", s.namespace, s.name, path, ErrNotFound)
	}
	var raw struct {
		Entries []struct {
			Name       string `json:"name"`
			Size       int64  `json:"size"`
			Type       string `json:"type"`
			ModifiedAt string `json:"modified_at"`
		} `json:"entries"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxResultSize)).Decode(&raw); err != nil {
		return nil, fmt.Errorf("sandbox %s/%s: list %q: decoding: %w", s.namespace, s.name, path, ctxError(ctx, err))
	}
	out := make([]FileEntry, 0, len(raw.Entries))
	for _, e := range raw.Entries {
		mod, _ := time.Parse(time.RFC3339Nano, e.ModifiedAt)
		out = append(out, FileEntry{Name: e.Name, Size: e.Size, Type: e.Type, ModTime: mod.UTC()})
	}
	return out, nil
}

// existsSandboxd is Exists over sandboxd: HEAD /v1/files/{path}, 200 or
// 404.
func (s *Sandbox) existsSandboxd(ctx context.Context, path string) (bool, error) {
	resp, err := s.call(ctx, request{op: "exists", method: http.MethodHead, endpoint: "v1/files/" + encodePath(path), idempotent: true})
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w (path %q)", err, path)
	}
	drainClose(resp)
	return true, nil
}
