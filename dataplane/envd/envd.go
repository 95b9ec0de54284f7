package envd

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"connectrpc.com/connect"

	"github.com/agentsandbox/reconciler/dataplane/envd/envdpb/filesystempb/filesystempbconnect"
	"github.com/agentsandbox/reconciler/dataplane/envd/envdpb/processpb/processpbconnect"
	"github.com/agentsandbox/reconciler/dataplane/runtime"
)

// Version is the envd version this implementation answers for: the SDK
// enables stdin (0.3.0), no default user (0.4.0), CloseStdin (0.5.2) and
// octet-stream uploads (0.5.7) by it, all served here. It stays below 0.6.2,
// whose file metadata (user.e2b.* extended attributes) is not served.
const Version = "0.5.7"

// DefaultHomeDir is E2B's user home, where relative paths and programs
// start.
const DefaultHomeDir = "/home/user"

// Port is where E2B's SDK expects the daemon (the E2b-Sandbox-Port header).
const Port = 49983

// Options configure the envd handler. The zero value of a field means its
// default.
type Options struct {
	// BaseDir is the sandbox's root: every path is confined to it, and
	// programs run in it unless they name another working directory under
	// it. It must exist.
	BaseDir string
	// HomeDir is the user's home as clients see it (E2B's /home/user, the
	// default): relative paths are under it, programs run in it unless
	// they name another working directory, and their HOME is it. New
	// creates it under BaseDir. "/" is the base directory itself.
	HomeDir string
	// MaxUploadBytes caps one file of POST /files (413 beyond it).
	MaxUploadBytes int64
	// Middleware wraps the whole handler (authentication); nil wraps
	// nothing.
	Middleware func(http.Handler) http.Handler
	// Logger receives one line per program and per failed request; nil
	// logs nothing.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.BaseDir == "" {
		o.BaseDir = runtime.DefaultBaseDir
	}
	if abs, err := filepath.Abs(o.BaseDir); err == nil {
		o.BaseDir = abs
	}
	if o.HomeDir == "" {
		o.HomeDir = DefaultHomeDir
	}
	o.HomeDir = clean(o.HomeDir)
	if o.MaxUploadBytes <= 0 {
		o.MaxUploadBytes = runtime.DefaultMaxUploadBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Server is the envd HTTP handler.
type Server struct {
	opts    Options
	handler http.Handler
	procs   *processService
}

// abs is the client's path raw as an absolute, clean path: a relative one
// is under the home directory; an empty one is the root.
func (o Options) abs(raw string) string {
	if raw == "" || strings.HasPrefix(raw, "/") {
		return clean(raw)
	}
	return clean(o.HomeDir + "/" + raw)
}

// New returns the envd handler:
//
//	POST /process.Process/{Start,Connect,List,SendInput,CloseStdin,SendSignal,Update}
//	POST /filesystem.Filesystem/{Stat,ListDir,MakeDir,Remove,Move,WatchDir}
//	GET  /files?path=&username=       a file's bytes (404 when missing)
//	POST /files?path=&username=       multipart parts "file" or a raw body
//	GET  /health                      204
func New(opts Options) *Server {
	o := opts.withDefaults()
	if home, err := resolve(o.BaseDir, o.HomeDir); err == nil {
		// Best effort: a read-only base directory still serves.
		if err := os.MkdirAll(home, 0o755); err != nil {
			o.Logger.Warn("envd home directory", "path", o.HomeDir, "err", err)
		}
	}
	s := &Server{opts: o, procs: newProcessService(o)}
	mux := http.NewServeMux()
	// Connect's JSON codec is what the SDK speaks; the binary one comes
	// with the library.
	path, h := processpbconnect.NewProcessHandler(s.procs, connect.WithReadMaxBytes(maxMessageBytes))
	mux.Handle(path, h)
	path, h = filesystempbconnect.NewFilesystemHandler(&filesystemService{opts: o}, connect.WithReadMaxBytes(maxMessageBytes))
	mux.Handle(path, h)
	mux.HandleFunc("/files", s.files)
	mux.HandleFunc("/health", s.health)
	var handler http.Handler = mux
	if o.Middleware != nil {
		handler = o.Middleware(handler)
	}
	s.handler = handler
	return s
}

// maxMessageBytes caps one Connect request message (a SendInput's bytes
// included).
const maxMessageBytes = 4 << 20

// ServeHTTP serves the envd API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Close kills the process group of every program still running and waits
// (each at most the wait delay) for their end events to be sent.
func (s *Server) Close() { s.procs.closeAll() }

// health answers GET /health: 204 while the base directory is there.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeHTTPError(w, http.StatusMethodNotAllowed, "use GET /health")
		return
	}
	if _, err := runtime.Resolve(s.opts.BaseDir, "/"); err != nil {
		writeHTTPError(w, http.StatusServiceUnavailable, "base directory: "+err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// quote shortens and quotes a path for an error message.
func quote(s string) string {
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return `"` + strings.ToValidUTF8(s, "?") + `"`
}
