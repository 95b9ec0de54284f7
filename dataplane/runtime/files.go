package runtime

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// multipartSlack is what an upload body may hold beyond the file itself:
// boundaries, part headers, small extra fields.
const multipartSlack = 64 << 10

// FileEntry is one entry of GET /list/{path}.
type FileEntry struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	// Type is "file" or "directory" (a symlink is what it points to).
	Type string `json:"type"`
	// ModTime is the modification time in seconds since the epoch.
	ModTime float64 `json:"mod_time"`
}

// ExistsResponse is the answer to GET /exists/{path}.
type ExistsResponse struct {
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
}

// upload stores the multipart field "file" in the base directory under its
// filename, a path under the base directory. The file is written to a
// temporary name and renamed into place, so a failed or oversized upload
// leaves nothing behind and readers never see half a file.
func (h *handler) upload(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxUploadBytes+multipartSlack)
	missing := fieldError([]string{"body", "file"}, "missing", "Field required")
	mr, err := r.MultipartReader()
	if err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, missing)
		return
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			writeJSON(w, http.StatusUnprocessableEntity, missing)
			return
		}
		if err != nil {
			h.bodyError(w, err)
			return
		}
		if part.FormName() != "file" {
			if _, err := io.Copy(io.Discard, part); err != nil {
				h.bodyError(w, err)
				return
			}
			continue
		}
		// The filename as sent: multipart.Part.FileName would reduce
		// "../x" to "x" and hide what the client asked for.
		_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		name, ok := params["filename"]
		if !ok {
			writeJSON(w, http.StatusUnprocessableEntity, fieldError([]string{"body", "file"}, "value_error", "Expected UploadFile, received: str"))
			return
		}
		h.store(w, name, part)
		return
	}
}

// store checks name (a path relative to the base directory, as upstream's
// SDKs send it: "notes.txt" or "data/in.csv") and writes the content of
// src to it, making missing directories on the way.
func (h *handler) store(w http.ResponseWriter, name string, src io.Reader) {
	switch {
	case name == "" || name == ".":
		writeJSON(w, http.StatusBadRequest, message("Invalid filename %q: the multipart filename must name a file", name))
		return
	case escapes(name), strings.HasPrefix(name, "/"):
		// Climbs out of the base directory whatever the rest says; an
		// absolute name is outside it too (upstream joins it as is).
		writeJSON(w, http.StatusForbidden, message("Access denied"))
		return
	case strings.ContainsRune(name, 0) || strings.HasSuffix(name, "/"):
		writeJSON(w, http.StatusBadRequest, message("Invalid filename %q: the multipart filename must name a file under the base directory", name))
		return
	}
	target, err := h.resolve(name)
	if err != nil {
		h.pathError(w, "File upload", name, "File not found", err)
		return
	}
	if st, err := os.Stat(target); err == nil && st.IsDir() {
		writeJSON(w, http.StatusConflict, message("File upload failed: %q is a directory", name))
		return
	}
	// The target is confined (resolved above), and so is its directory:
	// creating what is missing of it stays inside the base directory.
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		h.pathError(w, "File upload", name, "File not found", err)
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), ".upload-*")
	if err != nil {
		h.pathError(w, "File upload", name, "File not found", err)
		return
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // a no-op once renamed
	n, err := io.Copy(tmp, io.LimitReader(src, h.opts.MaxUploadBytes+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		h.bodyError(w, err)
		return
	case n > h.opts.MaxUploadBytes:
		writeJSON(w, http.StatusRequestEntityTooLarge, message("File too large: the limit is %d bytes", h.opts.MaxUploadBytes))
		return
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		h.pathError(w, "File upload", name, "File not found", err)
		return
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		h.pathError(w, "File upload", name, "File not found", err)
		return
	}
	h.opts.Logger.Info("upload", "name", name, "bytes", n)
	writeJSON(w, http.StatusOK, message("File '%s' uploaded successfully.", name))
}

// escapes reports whether a name climbs out of the directory it is taken
// in, read as upstream reads it (leading slashes dropped).
func escapes(name string) bool {
	clean := path.Clean(strings.TrimLeft(name, "/"))
	return clean == ".." || strings.HasPrefix(clean, "../")
}

// bodyError answers a request body that could not be read.
func (h *handler) bodyError(w http.ResponseWriter, err error) {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeJSON(w, http.StatusRequestEntityTooLarge, message("File too large: the limit is %d bytes", h.opts.MaxUploadBytes))
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		writeJSON(w, http.StatusInsufficientStorage, message("File upload failed: %s", errText(err)))
	default:
		writeJSON(w, http.StatusBadRequest, message("Invalid multipart body: %s", errText(err)))
	}
}

// download sends a regular file's bytes (with Range and conditional request
// support).
func (h *handler) download(w http.ResponseWriter, r *http.Request, name string) {
	const notFound = "File not found"
	target, err := h.resolve(name)
	if err != nil {
		h.pathError(w, "Download", name, notFound, err)
		return
	}
	// O_NONBLOCK: opening a FIFO must not hang; it is refused below.
	f, err := os.OpenFile(target, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		h.pathError(w, "Download", name, notFound, err)
		return
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		h.pathError(w, "Download", name, notFound, err)
		return
	}
	if !st.Mode().IsRegular() {
		writeJSON(w, http.StatusNotFound, message(notFound))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filepath.Base(target)}))
	http.ServeContent(w, r, "", st.ModTime(), f)
}

// list describes the entries of a directory, sorted by name.
func (h *handler) list(w http.ResponseWriter, name string) {
	const notFound = "Directory not found"
	target, err := h.resolve(name)
	if err != nil {
		h.pathError(w, "List", name, notFound, err)
		return
	}
	st, err := os.Stat(target)
	if err != nil {
		h.pathError(w, "List", name, notFound, err)
		return
	}
	if !st.IsDir() {
		writeJSON(w, http.StatusNotFound, message("Not a directory"))
		return
	}
	dirents, err := os.ReadDir(target)
	if err != nil {
		h.pathError(w, "List", name, notFound, err)
		return
	}
	entries := make([]FileEntry, 0, len(dirents))
	for _, d := range dirents {
		info, err := os.Stat(filepath.Join(target, d.Name())) // through symlinks, like Python
		if err != nil {
			if info, err = d.Info(); err != nil {
				continue // removed in the meantime
			}
		}
		e := FileEntry{Name: d.Name(), Size: info.Size(), Type: "file", ModTime: float64(info.ModTime().UnixNano()) / 1e9}
		if info.IsDir() {
			e.Type = "directory"
		}
		entries = append(entries, e)
	}
	writeJSON(w, http.StatusOK, entries)
}

// exists reports whether the path names anything (through symlinks; a
// dangling one does not exist).
func (h *handler) exists(w http.ResponseWriter, name string) {
	target, err := h.resolve(name)
	if err == nil {
		_, err = os.Stat(target)
	}
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, ExistsResponse{Path: name, Exists: true})
	case notExist(err) || errors.Is(err, syscall.ELOOP):
		writeJSON(w, http.StatusOK, ExistsResponse{Path: name, Exists: false})
	default:
		h.pathError(w, "Exists", name, "", fmt.Errorf("exists: %w", err))
	}
}
