package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentsandbox/reconciler/dataplane/webguard"
)

// Defaults, upstream's where upstream has one.
const (
	// DefaultBaseDir is where commands run and files live (SANDBOX_BASE_DIR).
	DefaultBaseDir = "/app"
	// DefaultExecTimeout bounds one command (SANDBOX_EXEC_TIMEOUT_SECONDS).
	DefaultExecTimeout = 300 * time.Second
	// DefaultMaxOutputBytes caps stdout and stderr, each.
	DefaultMaxOutputBytes = 8 << 20
	// DefaultMaxUploadBytes caps one uploaded file (the upstream Go SDK's
	// default MaxUploadSize).
	DefaultMaxUploadBytes = 256 << 20
	// DefaultMaxRequestBytes caps a JSON request body (/execute).
	DefaultMaxRequestBytes = 1 << 20
)

// Options configure the runtime. The zero value of a field means its default.
type Options struct {
	// BaseDir is the directory commands run in and every file path is
	// confined to. It must exist.
	BaseDir string
	// ExecTimeout bounds one command; when it passes, the command's whole
	// process group is killed.
	ExecTimeout time.Duration
	// MaxOutputBytes caps what is kept of a command's stdout, and separately
	// of its stderr; the rest is read and dropped, and the cut is noted at
	// the end of stderr.
	MaxOutputBytes int64
	// MaxUploadBytes caps the size of an uploaded file (413 beyond it).
	MaxUploadBytes int64
	// MaxRequestBytes caps a JSON request body (413 beyond it).
	MaxRequestBytes int64
	// Logger receives one line per command and per failed request; nil logs
	// nothing.
	Logger *slog.Logger
	// AuthToken, when set, must arrive in the X-Sandbox-Runtime-Token
	// header (TokenHeader) of every request but the health checks (GET /,
	// GET /v1/health); others get 401. The router sends it: a runtime with
	// a token serves only requests that came through the router. Compared
	// in constant time.
	AuthToken string
	// AllowedHosts, when set, refuses (403) requests whose Host header is
	// neither one of its names nor an IP address (see webguard.Hosts): a
	// runtime listening on a developer's machine cannot be reached through
	// DNS rebinding. Nil checks no Host (a Pod is reached by its IP, a
	// Service name or a port-forward).
	AllowedHosts *webguard.Hosts
	// Tracer, if set, makes a server span per request that continues the
	// caller's traceparent (runtime.execute, runtime.upload, ...). Nil
	// (tracing off): no spans, and no wrapping at all.
	Tracer trace.TracerProvider
}

func (o Options) withDefaults() Options {
	if o.BaseDir == "" {
		o.BaseDir = DefaultBaseDir
	}
	if abs, err := filepath.Abs(o.BaseDir); err == nil {
		o.BaseDir = abs
	}
	if o.ExecTimeout <= 0 {
		o.ExecTimeout = DefaultExecTimeout
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if o.MaxUploadBytes <= 0 {
		o.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// New returns the runtime's HTTP handler, serving upstream's legacy protocol:
//
//	GET  /                  health: {"status": "ok", "message": ...}
//	POST /execute           {"command": "..."} -> {"stdout", "stderr", "exit_code"}
//	POST /upload            multipart/form-data, field "file", filename a path under the base
//	GET  /download/{path}   the file's bytes
//	GET  /list/{path}       [{"name", "size", "type": "file"|"directory", "mod_time"}]
//	GET  /exists/{path}     {"path", "exists"}
//
// {path} is percent-encoded (a "/" inside it may be %2F) and relative to
// Options.BaseDir. A command started by a request is killed (with its process
// group) when the request's context ends, so a server whose BaseContext is
// cancelled stops every running command.
func New(opts Options) http.Handler {
	o := opts.withDefaults()
	h := &handler{opts: o, guard: guard{opts: o, health: isHealth}}
	if o.Tracer != nil {
		return &traced{next: h, tracer: o.Tracer.Tracer(tracerName)}
	}
	return h
}

type handler struct {
	opts  Options
	guard guard
}

// ServeHTTP dispatches on the escaped path, so that "%2F" and "%2E%2E" in
// {path} reach the handlers as data and no path cleaning or redirect happens
// before the confinement check.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.guard.refused(w, r) {
		return
	}
	p := r.URL.EscapedPath()
	if p == "/" {
		h.method(w, r, http.MethodGet, h.health)
		return
	}
	route, rest, hasRest := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	switch route {
	case "execute", "upload":
		if hasRest {
			break
		}
		if route == "execute" {
			h.method(w, r, http.MethodPost, h.execute)
		} else {
			h.method(w, r, http.MethodPost, h.upload)
		}
		return
	case "download", "list", "exists":
		path, err := url.PathUnescape(rest)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, message("Invalid percent-encoding in path"))
			return
		}
		h.method(w, r, http.MethodGet, func(w http.ResponseWriter, r *http.Request) {
			switch route {
			case "download":
				h.download(w, r, path)
			case "list":
				h.list(w, path)
			default:
				h.exists(w, path)
			}
		})
		return
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
}

// method runs fn for requests with the given method and answers others as
// FastAPI does.
func (h *handler) method(w http.ResponseWriter, r *http.Request, method string, fn http.HandlerFunc) {
	if r.Method != method {
		w.Header().Set("Allow", method)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"detail": "Method Not Allowed"})
		return
	}
	fn(w, r)
}

func (h *handler) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	}{"ok", "Sandbox Runtime is active."})
}

// message is upstream's error body.
func message(format string, a ...any) map[string]string {
	return map[string]string{"message": fmt.Sprintf(format, a...)}
}

// fieldError is FastAPI's 422 body for a request that does not have the
// shape the endpoint expects.
func fieldError(loc []string, kind, msg string) map[string]any {
	return map[string]any{"detail": []map[string]any{{"type": kind, "loc": loc, "msg": msg}}}
}

// writeJSON answers with v as FastAPI's JSONResponse renders it (upstream's
// runtime): compact, "<", ">" and "&" as themselves, no trailing newline.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	body := []byte(`{"message":"Internal error: cannot encode the response"}`)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
	} else {
		body = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// pathError answers a failed path operation: upstream's 403 for a path that
// leaves the base directory, 404 (with notFound) for one that is not there,
// 500 for anything else.
func (h *handler) pathError(w http.ResponseWriter, op, path, notFound string, err error) {
	switch {
	case errors.Is(err, errAccessDenied):
		writeJSON(w, http.StatusForbidden, message("Access denied"))
	case notExist(err):
		writeJSON(w, http.StatusNotFound, message("%s", notFound))
	case errors.Is(err, syscall.ELOOP):
		writeJSON(w, http.StatusNotFound, message("%s: too many levels of symbolic links", notFound))
	default:
		h.opts.Logger.Error("request failed", "op", op, "path", path, "err", err)
		writeJSON(w, http.StatusInternalServerError, message("%s failed: %s", op, errText(err)))
	}
}

// errText is an error's message without the absolute paths of the runtime's
// file system.
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
