package sandboxd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/agentsandbox/reconciler/dataplane/runtime"
)

// Error codes of the REST API's error body {"code", "message"}.
const (
	CodeInvalidArgument    = "INVALID_ARGUMENT"
	CodePermissionDenied   = "PERMISSION_DENIED"
	CodeNotFound           = "NOT_FOUND"
	CodeFailedPrecondition = "FAILED_PRECONDITION"
	CodeConflict           = "CONFLICT"
	CodeMethodNotAllowed   = "METHOD_NOT_ALLOWED"
	CodeResourceExhausted  = "RESOURCE_EXHAUSTED"
	CodeUnavailable        = "UNAVAILABLE"
	CodeInternal           = "INTERNAL"
)

// Upstream sandboxd's messages for the errors its SDKs surface
// ("CODE: message"): a path that leaves the root, a path that is not
// there, a directory that is not empty.
const (
	msgEscapes  = "path traversal outside sandbox root is forbidden"
	msgNotFound = "path does not exist within the sandbox"
	msgNotEmpty = "directory is not empty; pass recursive=true to remove it"
	msgIsDir    = "target path is a directory"
)

// filesPrefix is where the filesystem API lives.
const filesPrefix = "/v1/files"

// Error is the REST API's error body.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// NewHandler returns sandboxd's REST API (served on port 8080):
//
//	GET    /v1/files/{path}             a file's bytes, or a directory's listing (JSON)
//	HEAD   /v1/files/{path}             200 when it exists, 404 when not
//	PUT    /v1/files/{path}?mode=0644   store the body (raw, or multipart part "file"): 204
//	DELETE /v1/files/{path}?recursive=  remove: 204; 409 for a non-empty directory without recursive=true
//	GET    /v1/health                   {"status": "ok", "uptime_seconds"}; 503 when not ready
//	GET    /v1/metadata                 {"env": {...}}: Options.Metadata
//
// {path} is relative to Options.BaseDir, percent-decoded as a whole (a "/"
// inside a segment arrives as %2F) and confined to it exactly as the legacy
// protocol's paths are (runtime.Resolve): a path that leaves it is 403
// PERMISSION_DENIED. Errors are JSON {"code", "message"}. Options.Middleware,
// if set, wraps the whole handler.
func NewHandler(opts Options) http.Handler {
	h := &restHandler{opts: opts.withDefaults(), started: time.Now()}
	if h.opts.Middleware != nil {
		return h.opts.Middleware(h)
	}
	return h
}

type restHandler struct {
	opts    Options
	started time.Time
}

// ServeHTTP dispatches on the escaped path, so that %2F and %2E%2E reach the
// file handlers as data and nothing is cleaned or redirected before the
// confinement check.
func (h *restHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.EscapedPath()
	switch {
	case p == "/v1/health":
		h.only(w, r, h.health, http.MethodGet, http.MethodHead)
	case p == "/v1/metadata":
		h.only(w, r, h.metadata, http.MethodGet, http.MethodHead)
	case p == filesPrefix || strings.HasPrefix(p, filesPrefix+"/"):
		raw, err := url.PathUnescape(strings.TrimPrefix(strings.TrimPrefix(p, filesPrefix), "/"))
		if err != nil {
			writeError(w, http.StatusBadRequest, CodeInvalidArgument, "invalid percent-encoding in the path")
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			h.get(w, r, raw)
		case http.MethodPut:
			h.put(w, r, raw)
		case http.MethodDelete:
			h.remove(w, r, raw)
		default:
			w.Header().Set("Allow", "GET, HEAD, PUT, DELETE")
			writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, r.Method+" is not allowed on "+filesPrefix)
		}
	default:
		writeError(w, http.StatusNotFound, CodeNotFound, "no such endpoint")
	}
}

func (h *restHandler) only(w http.ResponseWriter, r *http.Request, fn http.HandlerFunc, methods ...string) {
	for _, m := range methods {
		if r.Method == m {
			fn(w, r)
			return
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, r.Method+" is not allowed here")
}

// health answers as upstream sandboxd does: 200 {"status": "ok",
// "uptime_seconds": whole seconds}, or 503 with the error body (code
// UNAVAILABLE) when the runtime cannot serve.
func (h *restHandler) health(w http.ResponseWriter, _ *http.Request) {
	if err := h.opts.Ready(); err != nil {
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, errText(err))
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Status        string `json:"status"`
		UptimeSeconds int64  `json:"uptime_seconds"`
	}{"ok", int64(time.Since(h.started).Seconds())})
}

func (h *restHandler) metadata(w http.ResponseWriter, _ *http.Request) {
	env := h.opts.Metadata
	if env == nil {
		env = map[string]string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"env": env})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"code":"INTERNAL","message":"cannot encode the response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, Error{Code: code, Message: msg})
}

// pathError answers a failed file operation on path: 403 for a path that
// leaves the root, 404 for one that is not there, 409 for one whose state
// forbids the operation, 500 for anything else.
func (h *restHandler) pathError(w http.ResponseWriter, op, path string, err error) {
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, runtime.ErrAccessDenied):
		writeError(w, http.StatusForbidden, CodePermissionDenied, msgEscapes)
	case errors.Is(err, syscall.ENOTDIR):
		writeError(w, http.StatusConflict, CodeFailedPrecondition, fmt.Sprintf("%s %q: a part of the path is not a directory", op, path))
	case runtime.IsNotExist(err), errors.Is(err, syscall.ELOOP):
		writeError(w, http.StatusNotFound, CodeNotFound, msgNotFound)
	case errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST), errors.Is(err, syscall.EISDIR):
		writeError(w, http.StatusConflict, CodeFailedPrecondition, fmt.Sprintf("%s %q: %s", op, path, errText(err)))
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, CodeResourceExhausted, fmt.Sprintf("%s %q: the body is over %d bytes", op, path, h.opts.MaxUploadBytes))
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		writeError(w, http.StatusInsufficientStorage, CodeResourceExhausted, fmt.Sprintf("%s %q: %s", op, path, errText(err)))
	case errors.Is(err, fs.ErrPermission):
		writeError(w, http.StatusForbidden, CodePermissionDenied, fmt.Sprintf("%s %q: %s", op, path, errText(err)))
	default:
		h.opts.Logger.Error("request failed", "op", op, "path", path, "err", err)
		writeError(w, http.StatusInternalServerError, CodeInternal, fmt.Sprintf("%s %q: %s", op, path, errText(err)))
	}
}

// errText is an error's message without the runtime's absolute paths.
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
