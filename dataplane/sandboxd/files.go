package sandboxd

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentsandbox/reconciler/dataplane/runtime"
)

// DirEntry is one entry of a directory listing.
type DirEntry struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	// Type is "file" or "directory" (a symlink is what it points to).
	Type string `json:"type"`
	// ModifiedAt is RFC 3339, in UTC.
	ModifiedAt string `json:"modified_at"`
	// Mode is the permission bits in octal, e.g. "0644".
	Mode string `json:"mode"`
}

// DirListing is GET /v1/files/{path} on a directory.
type DirListing struct {
	Path    string     `json:"path"`
	Entries []DirEntry `json:"entries"`
}

// modePattern is what ?mode= must look like.
var modePattern = regexp.MustCompile(`^0[0-7]{3}$`)

// multipartSlack is what a multipart body may hold beyond the file itself.
const multipartSlack = 64 << 10

// get answers GET and HEAD: a regular file's bytes (with Range support), a
// directory's listing, or 404.
func (h *restHandler) get(w http.ResponseWriter, r *http.Request, path string) {
	target, err := runtime.Resolve(h.opts.BaseDir, path)
	if err != nil {
		h.pathError(w, "read", path, err)
		return
	}
	// O_NONBLOCK: opening a FIFO must not hang; it is refused below.
	f, err := os.OpenFile(target, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		h.pathError(w, "read", path, err)
		return
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		h.pathError(w, "read", path, err)
		return
	}
	switch {
	case st.IsDir():
		h.listDir(w, path, f)
	case st.Mode().IsRegular():
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, r, "", st.ModTime(), f)
	default:
		writeError(w, http.StatusBadRequest, CodeInvalidArgument, fmt.Sprintf("read %q: not a regular file or directory", path))
	}
}

func (h *restHandler) listDir(w http.ResponseWriter, path string, dir *os.File) {
	names, err := dir.Readdirnames(-1)
	if err != nil {
		h.pathError(w, "list", path, err)
		return
	}
	entries := make([]DirEntry, 0, len(names))
	for _, name := range names {
		full := filepath.Join(dir.Name(), name)
		info, err := os.Stat(full) // through symlinks
		if err != nil {
			if info, err = os.Lstat(full); err != nil {
				continue // removed in the meantime
			}
		}
		e := DirEntry{Name: name, Size: info.Size(), Type: "file",
			ModifiedAt: info.ModTime().UTC().Format(time.RFC3339), Mode: fmt.Sprintf("%04o", info.Mode().Perm())}
		if info.IsDir() {
			e.Type = "directory"
		}
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
	// The listing's path is the request's, made absolute (upstream's
	// "/" + path: "/" for the root).
	writeJSON(w, http.StatusOK, DirListing{Path: "/" + strings.TrimPrefix(path, "/"), Entries: entries})
}

// put stores the request body (raw, or the multipart part "file") at path
// with ?mode (default 0644), making missing directories. The body goes to
// a temporary file renamed into place, so a failed upload leaves nothing
// and readers never see half a file.
func (h *restHandler) put(w http.ResponseWriter, r *http.Request, path string) {
	mode := os.FileMode(0o644)
	if m := r.URL.Query().Get("mode"); m != "" || r.URL.Query().Has("mode") {
		if !modePattern.MatchString(m) {
			writeError(w, http.StatusBadRequest, CodeInvalidArgument, fmt.Sprintf("mode %q must match ^0[0-7]{3}$", m))
			return
		}
		v, _ := strconv.ParseUint(m, 8, 32)
		mode = os.FileMode(v)
	}
	if name := strings.TrimRight(path, "/"); name == "" || name == "." || strings.HasSuffix(path, "/") {
		writeError(w, http.StatusBadRequest, CodeInvalidArgument, fmt.Sprintf("write %q: the path must name a file", path))
		return
	}
	target, err := runtime.Resolve(h.opts.BaseDir, path)
	if err != nil {
		h.pathError(w, "write", path, err)
		return
	}
	if st, err := os.Stat(target); err == nil && st.IsDir() {
		writeError(w, http.StatusBadRequest, CodeInvalidArgument, msgIsDir)
		return
	}
	body, err := h.uploadBody(w, r)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidArgument, fmt.Sprintf("write %q: %s", path, err))
		return
	}
	// The target is confined (resolved above), and so is its directory.
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		h.pathError(w, "write", path, err)
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), ".upload-*")
	if err != nil {
		h.pathError(w, "write", path, err)
		return
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // a no-op once renamed
	n, err := io.Copy(tmp, io.LimitReader(body, h.opts.MaxUploadBytes+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > h.opts.MaxUploadBytes {
		err = &http.MaxBytesError{Limit: h.opts.MaxUploadBytes}
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), mode)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), target)
	}
	if err != nil {
		h.pathError(w, "write", path, err)
		return
	}
	h.opts.Logger.Info("put", "path", path, "bytes", n, "mode", fmt.Sprintf("%04o", mode))
	w.WriteHeader(http.StatusNoContent)
}

// uploadBody is the file's content: the multipart part "file" when the
// request is multipart/form-data, else the raw body.
func (h *restHandler) uploadBody(w http.ResponseWriter, r *http.Request) (io.Reader, error) {
	r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxUploadBytes+multipartSlack)
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		return r.Body, nil
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, fmt.Errorf("multipart body: %w", err)
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil, errors.New(`multipart body: no part "file"`)
		}
		if err != nil {
			return nil, fmt.Errorf("multipart body: %w", err)
		}
		if part.FormName() == "file" {
			return part, nil
		}
		if _, err := io.Copy(io.Discard, part); err != nil {
			return nil, fmt.Errorf("multipart body: %w", err)
		}
	}
}

// remove deletes path: a file, a symlink (not what it points to), an empty
// directory, or with ?recursive=true a directory and everything under it.
func (h *restHandler) remove(w http.ResponseWriter, r *http.Request, path string) {
	recursive := false
	if v := r.URL.Query().Get("recursive"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, CodeInvalidArgument, fmt.Sprintf("recursive %q: want true or false", v))
			return
		}
		recursive = b
	}
	clean := strings.TrimRight(path, "/")
	base := filepath.Base(clean)
	if clean == "" || base == "." || base == ".." || base == "/" {
		writeError(w, http.StatusBadRequest, CodeInvalidArgument, fmt.Sprintf("delete %q: the path must name an entry under the root", path))
		return
	}
	// The directory is resolved and confined; the last component is
	// taken as it is, so a symlink is removed itself, never its target.
	dir, err := runtime.Resolve(h.opts.BaseDir, filepath.Dir(clean))
	if err != nil {
		h.pathError(w, "delete", path, err)
		return
	}
	target := filepath.Join(dir, base)
	st, err := os.Lstat(target)
	if err != nil {
		h.pathError(w, "delete", path, err)
		return
	}
	switch {
	case st.IsDir() && recursive:
		err = os.RemoveAll(target)
	case st.IsDir():
		err = syscall.Rmdir(target)
		if errors.Is(err, syscall.EEXIST) {
			err = syscall.ENOTEMPTY
		}
		if errors.Is(err, syscall.ENOTEMPTY) {
			writeError(w, http.StatusConflict, CodeConflict, msgNotEmpty)
			return
		}
	default:
		err = os.Remove(target)
	}
	if err != nil {
		h.pathError(w, "delete", path, err)
		return
	}
	h.opts.Logger.Info("delete", "path", path, "recursive", recursive)
	w.WriteHeader(http.StatusNoContent)
}
