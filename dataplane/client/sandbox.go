package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/resume"
)

// Sandbox is one running sandbox: its runtime's commands and files. Its
// methods are safe for concurrent use. Close it when done.
type Sandbox struct {
	namespace, name, claimName, podName string
	podIPs                              []string
	client                              *Client
	ownsClaim                           bool // made by Create: Close deletes the claim

	uid types.UID
	// claimUID, set when the Sandbox was opened by claim (openByClaim),
	// is sent on every request for the router to check.
	claimUID types.UID

	conn   *conn
	mu     sync.Mutex
	closed bool
	// policy is what the Sandbox's resume annotations asked for when last
	// read; reporter reports its activity (idle suspend), stopReporting
	// ends that.
	policy        sandboxv1beta1.ResumePolicy
	reporter      *resume.Reporter
	stopReporting context.CancelFunc
}

// Namespace is the sandbox's namespace.
func (s *Sandbox) Namespace() string { return s.namespace }

// Name is the Sandbox's name (what a router calls X-Sandbox-ID).
func (s *Sandbox) Name() string { return s.name }

// ClaimName is the SandboxClaim the sandbox is bound to, if any.
func (s *Sandbox) ClaimName() string { return s.claimName }

// PodName is the sandbox's Pod.
func (s *Sandbox) PodName() string { return s.podName }

// Result is what a command printed and how it exited.
type Result struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
}

// FileEntry is one entry of a directory listing.
type FileEntry struct {
	Name    string
	Size    int64
	Type    string // FileTypeFile or FileTypeDirectory
	ModTime time.Time
}

// Types of a FileEntry.
const (
	FileTypeFile      = "file"
	FileTypeDirectory = "directory"
)

// MaxResultSize bounds a Run response, as upstream's runtime bounds output.
const MaxResultSize = 16 << 20

// connect sets up the strategy's transport and checks that the runtime
// answers (GET /, retried like every idempotent call).
func (s *Sandbox) connect(ctx context.Context, o *options) error {
	c := &conn{
		namespace: s.namespace, name: s.name, uid: newPin(s.uid), claimUID: s.claimUID, port: o.port, token: o.token,
		attempts: o.attempts, backoff: o.backoff, maxBackoff: o.maxBackoff, close: func() {},
	}
	hc := o.httpClient
	if hc == nil {
		hc = &http.Client{}
	}
	hc = &http.Client{Transport: hc.Transport, Jar: hc.Jar, Timeout: hc.Timeout, CheckRedirect: noRedirects}
	switch o.strategy {
	case viaRouter:
		c.base, c.router = strings.TrimSuffix(o.url, "/")+"/", true
	case viaBaseURL:
		c.base = strings.TrimSuffix(s.expand(o.url), "/") + "/"
	case viaSandboxd:
		if err := s.connectSandboxd(c); err != nil {
			return err
		}
		hc = c.http
	default:
		pf, err := newPortForward(s.client.cfg, s.client.core, s.namespace, s.podName, s.uid, o.port)
		if err != nil {
			return err
		}
		c.token = ""
		c.base = "http://" + net.JoinHostPort(s.podName, strconv.Itoa(o.port)) + "/"
		hc = &http.Client{Transport: pf.transport(), CheckRedirect: noRedirects}
		c.close = pf.Close
	}
	c.http = hc
	s.conn = c
	if o.strategy == viaRouter && o.seenReady && !o.starting {
		// Create just saw the Sandbox Ready. A router sends a request
		// again while its connection to the Pod fails before the runtime
		// got it, and marks what it answered itself (HeaderNotForwarded),
		// which every call sends again: the first call finds the runtime
		// as a health request would, a round trip sooner.
		return nil
	}
	health := c
	if o.starting {
		health = c.polling()
	}
	resp, err := health.do(ctx, request{op: "health", method: http.MethodGet, endpoint: c.healthEndpoint(), idempotent: true})
	if err != nil {
		c.close()
		return fmt.Errorf("sandbox %s/%s: runtime not answering: %w", s.namespace, s.name, err)
	}
	drainClose(resp)
	return nil
}

// expand fills the placeholders of a WithBaseURL template.
func (s *Sandbox) expand(tmpl string) string {
	ip := ""
	for _, a := range s.podIPs {
		if p := net.ParseIP(a); p != nil && (ip == "" || p.To4() != nil) {
			ip = a
			if p.To4() != nil {
				break
			}
		}
	}
	if strings.Contains(ip, ":") {
		ip = "[" + ip + "]"
	}
	return strings.NewReplacer("{name}", s.name, "{namespace}", s.namespace, "{pod}", s.podName, "{podIP}", ip).Replace(tmpl)
}

func (s *Sandbox) call(ctx context.Context, r request) (*http.Response, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("sandbox %s/%s: %s: %w", s.namespace, s.name, r.op, ErrClosed)
	}
	end := s.began()
	defer end()
	var sent *countingReader
	if r.body != nil {
		sent = &countingReader{r: r.body}
		r.body = sent
	}
	resp, err := s.conn.do(ctx, r)
	if gone := (podGone{}); errors.As(err, &gone) {
		// The Pod is gone (the Sandbox suspended, or its Pod replaced): the
		// call never reached the runtime, so after a resume it is sent again.
		if werr := s.wake(ctx); werr != nil {
			return nil, fmt.Errorf("sandbox %s/%s: %s: %w", s.namespace, s.name, r.op, werr)
		}
		if sent != nil && sent.n > 0 {
			return nil, fmt.Errorf("sandbox %s/%s: %s: resumed, but part of the request body was read and it cannot be sent again: %w", s.namespace, s.name, r.op, err)
		}
		resp, err = s.conn.do(ctx, r)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox %s/%s: %w", s.namespace, s.name, err)
	}
	return resp, nil
}

// Run runs command in the sandbox and returns its output and exit code. It
// reaches the runtime at most once: it is sent again only when a router
// answered that it never reached the sandbox (HeaderNotForwarded). Upstream's runtime splits command
// like a POSIX shell (quotes, backslashes) and runs it without one, in its
// base directory; it reports its own failures (a timeout, a missing
// program) as exit code 1 with a message on stderr.
func (s *Sandbox) Run(ctx context.Context, command string) (Result, error) {
	if s.conn.proc != nil {
		return s.runSandboxd(ctx, command)
	}
	body, _ := json.Marshal(map[string]string{"command": command})
	resp, err := s.call(ctx, request{op: "run", method: http.MethodPost, endpoint: "execute",
		body: bytes.NewReader(body), length: int64(len(body)), contentType: "application/json",
		replay: func() io.Reader { return bytes.NewReader(body) }})
	if err != nil {
		return Result{}, err
	}
	defer drainClose(resp)
	var res Result
	lr := &io.LimitedReader{R: resp.Body, N: MaxResultSize + 1}
	if err := json.NewDecoder(lr).Decode(&res); err != nil {
		if lr.N <= 0 {
			return Result{}, fmt.Errorf("sandbox %s/%s: run: output over %d bytes: %w", s.namespace, s.name, MaxResultSize, ErrTooLarge)
		}
		return Result{}, fmt.Errorf("sandbox %s/%s: run: decoding the result: %w", s.namespace, s.name, ctxError(ctx, err))
	}
	return res, nil
}

// Write stores what r yields as the file name, a path relative to the
// runtime's base directory ("notes.txt", "data/in.csv": missing
// directories are made), with a multipart upload, field "file", as
// upstream's /upload takes it. r is streamed, not buffered, and sent once.
func (s *Sandbox) Write(ctx context.Context, name string, r io.Reader) error {
	if name == "" || name == "." || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || escapesBase(name) {
		return fmt.Errorf("sandbox %s/%s: write %q: want a file path relative to the runtime's base directory", s.namespace, s.name, name)
	}
	if s.conn.proc != nil {
		return s.writeSandboxd(ctx, name, r)
	}
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	if _, err := mw.CreateFormFile("file", name); err != nil {
		return err
	}
	prefix := bytes.Clone(head.Bytes())
	head.Reset()
	if err := mw.Close(); err != nil {
		return err
	}
	suffix := head.Bytes()
	length := int64(-1)
	if n, ok := sizeOf(r); ok {
		length = int64(len(prefix)) + n + int64(len(suffix))
	}
	body := io.MultiReader(bytes.NewReader(prefix), r, bytes.NewReader(suffix))
	resp, err := s.call(ctx, request{op: "write", method: http.MethodPost, endpoint: "upload",
		body: body, length: length, contentType: mw.FormDataContentType()})
	if err != nil {
		return fmt.Errorf("%w (file %q)", err, name)
	}
	drainClose(resp)
	return nil
}

// sizeOf is how many bytes r has left, when that is known.
func sizeOf(r io.Reader) (int64, bool) {
	switch v := r.(type) {
	case interface{ Len() int }:
		return int64(v.Len()), true
	case *os.File:
		fi, err := v.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return 0, false
		}
		off, err := v.Seek(0, io.SeekCurrent)
		if err != nil {
			return 0, false
		}
		return fi.Size() - off, true
	}
	return 0, false
}

// Read opens the file at path (relative to the runtime's base directory,
// or absolute inside it) for reading; close it when done. A missing file
// is ErrNotFound, a path outside the base directory ErrAccessDenied.
func (s *Sandbox) Read(ctx context.Context, path string) (io.ReadCloser, error) {
	if s.conn.proc != nil {
		return s.readSandboxd(ctx, path)
	}
	resp, err := s.call(ctx, request{op: "read", method: http.MethodGet, endpoint: "download/" + encodePath(path), idempotent: true})
	if err != nil {
		return nil, fmt.Errorf("%w (path %q)", err, path)
	}
	return resp.Body, nil
}

// List lists the directory at path ("" or "." for the base directory).
func (s *Sandbox) List(ctx context.Context, path string) ([]FileEntry, error) {
	if path == "" {
		path = "."
	}
	if s.conn.proc != nil {
		return s.listSandboxd(ctx, path)
	}
	resp, err := s.call(ctx, request{op: "list", method: http.MethodGet, endpoint: "list/" + encodePath(path), idempotent: true})
	if err != nil {
		return nil, fmt.Errorf("%w (path %q)", err, path)
	}
	defer drainClose(resp)
	var raw []struct {
		Name    string  `json:"name"`
		Size    int64   `json:"size"`
		Type    string  `json:"type"`
		ModTime float64 `json:"mod_time"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxResultSize)).Decode(&raw); err != nil {
		return nil, fmt.Errorf("sandbox %s/%s: list %q: decoding: %w", s.namespace, s.name, path, ctxError(ctx, err))
	}
	out := make([]FileEntry, 0, len(raw))
	for _, e := range raw {
		sec, frac := math.Modf(e.ModTime)
		out = append(out, FileEntry{Name: e.Name, Size: e.Size, Type: e.Type, ModTime: time.Unix(int64(sec), int64(frac*1e9)).UTC()})
	}
	return out, nil
}

// Exists reports whether a file or directory exists at path.
func (s *Sandbox) Exists(ctx context.Context, path string) (bool, error) {
	if s.conn.proc != nil {
		return s.existsSandboxd(ctx, path)
	}
	resp, err := s.call(ctx, request{op: "exists", method: http.MethodGet, endpoint: "exists/" + encodePath(path), idempotent: true})
	if err != nil {
		return false, fmt.Errorf("%w (path %q)", err, path)
	}
	defer drainClose(resp)
	var v struct {
		Exists bool `json:"exists"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&v); err != nil {
		return false, fmt.Errorf("sandbox %s/%s: exists %q: decoding: %w", s.namespace, s.name, path, ctxError(ctx, err))
	}
	return v.Exists, nil
}

// Close disconnects (ends the port-forward) and, for a Sandbox made by
// Create, deletes its claim, which deletes the Sandbox, its Pod and its
// volumes. A Sandbox from Open or Dial is left running. Closing twice
// does nothing.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	stop := s.stopReporting
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	s.conn.close()
	s.conn.http.CloseIdleConnections()
	if !s.ownsClaim {
		return nil
	}
	if err := s.client.deleteClaim(ctx, s.namespace, s.claimName); err != nil {
		return fmt.Errorf("sandbox %s/%s: deleting claim %s: %w", s.namespace, s.name, s.claimName, err)
	}
	return nil
}

// drainClose reads a little of what is left, so the connection can be
// reused, and closes the body.
func drainClose(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
}

// escapesBase reports whether a relative path climbs out of where it
// starts ("..", "a/../../b").
func escapesBase(name string) bool {
	depth := 0
	for _, part := range strings.Split(name, "/") {
		switch part {
		case "", ".":
		case "..":
			depth--
			if depth < 0 {
				return true
			}
		default:
			depth++
		}
	}
	return false
}

// countingReader counts what was read of a request body, so that a call
// whose body was never touched can be sent again.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
