package envd

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"syscall"

	"github.com/agentsandbox/reconciler/dataplane/runtime"
)

// WriteInfo is one file POST /files wrote.
type WriteInfo struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
}

// httpError is envd's HTTP error body.
type httpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeHTTPError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, httpError{Code: status, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// httpStatus is the status for a path error: 403 outside the base or not
// allowed, 404 missing, 400 otherwise.
func httpStatus(err error) int {
	switch {
	case errors.Is(err, runtime.ErrAccessDenied), errors.Is(err, os.ErrPermission):
		return http.StatusForbidden
	case runtime.IsNotExist(err):
		return http.StatusNotFound
	case errors.Is(err, syscall.ENOSPC):
		return http.StatusInsufficientStorage
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

func (s *Server) pathFailed(w http.ResponseWriter, op, p string, err error) {
	msg := fmt.Sprintf("%s %s: %s", op, quote(p), errText(err))
	if errors.Is(err, runtime.ErrAccessDenied) {
		msg = fmt.Sprintf("%s %s: the path leaves the sandbox's root", op, quote(p))
	}
	s.opts.Logger.Warn("envd files", "op", op, "path", clean(p), "err", errText(err))
	writeHTTPError(w, httpStatus(err), msg)
}

// files serves GET and POST /files. The username parameter is accepted and
// ignored: the sandbox has one user.
func (s *Server) files(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.download(w, r)
	case http.MethodPost:
		s.upload(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		writeHTTPError(w, http.StatusMethodNotAllowed, "use GET or POST /files?path=")
	}
}

// download answers a file's bytes (with Range support).
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	p := s.opts.abs(r.URL.Query().Get("path"))
	if r.URL.Query().Get("path") == "" {
		writeHTTPError(w, http.StatusBadRequest, "read: the path parameter is missing")
		return
	}
	real, err := resolve(s.opts.BaseDir, p)
	if err != nil {
		s.pathFailed(w, "read", p, err)
		return
	}
	// O_NONBLOCK: opening a FIFO must not hang; it is refused below.
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		s.pathFailed(w, "read", p, err)
		return
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		s.pathFailed(w, "read", p, err)
		return
	}
	if !st.Mode().IsRegular() {
		writeHTTPError(w, http.StatusBadRequest, fmt.Sprintf("read %s: not a regular file", quote(p)))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": st.Name()}))
	http.ServeContent(w, r, "", st.ModTime(), f)
}

// upload writes files: each multipart part "file" to the path parameter
// or, without one, to the part's filename (a path, not only a base name);
// any other body, raw, to the path parameter. A gzip Content-Encoding is
// undone first. Missing directories are made; each file is written to a
// temporary file renamed into place.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("path")
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxUploadBytes+multipartSlack)
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			writeHTTPError(w, http.StatusBadRequest, "write: gzip body: "+err.Error())
			return
		}
		body = zr
	}
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		if q == "" {
			writeHTTPError(w, http.StatusBadRequest, "write: the path parameter is missing")
			return
		}
		info, err := s.store(q, body)
		if err != nil {
			s.pathFailed(w, "write", q, err)
			return
		}
		writeJSON(w, http.StatusOK, []WriteInfo{info})
		return
	}
	mr, err := multipartReader(body, params)
	if err != nil {
		writeHTTPError(w, http.StatusBadRequest, "write: "+err.Error())
		return
	}
	var written []WriteInfo
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			writeHTTPError(w, httpStatus(err), "write: multipart body: "+err.Error())
			return
		}
		if part.FormName() != "file" {
			_, _ = io.Copy(io.Discard, part)
			continue
		}
		p := q
		if p == "" {
			p = partFilename(part.Header.Get("Content-Disposition"))
		}
		if p == "" {
			writeHTTPError(w, http.StatusBadRequest, `write: a part "file" has no filename and there is no path parameter`)
			return
		}
		info, err := s.store(p, part)
		if err != nil {
			s.pathFailed(w, "write", p, err)
			return
		}
		written = append(written, info)
	}
	if len(written) == 0 {
		writeHTTPError(w, http.StatusBadRequest, `write: the multipart body has no part "file"`)
		return
	}
	writeJSON(w, http.StatusOK, written)
}

// uploadPrefix names the temporary file an upload is written to before it
// is renamed into place (WatchDir does not report it).
const uploadPrefix = ".envd-upload-"

// multipartSlack is what a multipart body may hold beyond its files.
const multipartSlack = 64 << 10

// store writes src to the client's path p and describes it.
func (s *Server) store(p string, src io.Reader) (WriteInfo, error) {
	p = s.opts.abs(p)
	if c := clean(p); c == "/" {
		return WriteInfo{}, syscall.EISDIR
	}
	real, err := resolve(s.opts.BaseDir, p)
	if err != nil {
		return WriteInfo{}, err
	}
	if st, err := os.Stat(real); err == nil && st.IsDir() {
		return WriteInfo{}, syscall.EISDIR
	}
	// The target is confined (resolved above), and so is its directory.
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		return WriteInfo{}, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(real), uploadPrefix+"*")
	if err != nil {
		return WriteInfo{}, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // a no-op once renamed
	n, err := io.Copy(tmp, io.LimitReader(src, s.opts.MaxUploadBytes+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > s.opts.MaxUploadBytes {
		err = &http.MaxBytesError{Limit: s.opts.MaxUploadBytes}
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), real)
	}
	if err != nil {
		return WriteInfo{}, err
	}
	s.opts.Logger.Info("envd write", "path", clean(p), "bytes", n)
	return WriteInfo{Name: filepath.Base(real), Type: "file", Path: clean(p)}, nil
}

// partFilename is a part's filename parameter as sent: a path (the
// standard library's FileName keeps only its last element).
func partFilename(disposition string) string {
	_, params, err := mime.ParseMediaType(disposition)
	if err != nil {
		return ""
	}
	return params["filename"]
}

// multipartReader reads a multipart body with the boundary from its
// Content-Type parameters.
func multipartReader(body io.Reader, params map[string]string) (*multipart.Reader, error) {
	boundary := params["boundary"]
	if boundary == "" {
		return nil, errors.New("multipart body: no boundary in Content-Type")
	}
	return multipart.NewReader(body, boundary), nil
}
