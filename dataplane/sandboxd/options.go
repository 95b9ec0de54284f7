package sandboxd

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/agentsandbox/reconciler/dataplane/runtime"
)

// Options configure sandboxd's REST handler and gRPC service. The zero value
// of a field means its default.
type Options struct {
	// BaseDir is the sandbox's root: file paths are confined to it and
	// programs run in it unless their config names another working
	// directory under it. It must exist.
	BaseDir string
	// ExecTimeout bounds one Execute; when it passes, the program's whole
	// process group is killed. Start has no timeout: its program lives as
	// long as its stream.
	ExecTimeout time.Duration
	// MaxOutputBytes caps what Execute keeps of a program's stdout, and
	// separately of its stderr; the rest is read and dropped.
	MaxOutputBytes int64
	// MaxUploadBytes caps one PUT /v1/files body (413 beyond it).
	MaxUploadBytes int64
	// Metadata is what GET /v1/metadata reports as "env": non-sensitive
	// settings only, never credentials.
	Metadata map[string]string
	// Ready reports whether the runtime can serve; GET /v1/health answers
	// 503 while it returns an error. Nil checks that BaseDir is a directory.
	Ready func() error
	// Middleware wraps the REST handler (authentication, logging); nil
	// wraps nothing. The gRPC server takes interceptors as grpc.ServerOption
	// arguments of NewGRPCServer instead.
	Middleware func(http.Handler) http.Handler
	// Logger receives one line per program and per failed request; nil logs
	// nothing.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.BaseDir == "" {
		o.BaseDir = runtime.DefaultBaseDir
	}
	if abs, err := filepath.Abs(o.BaseDir); err == nil {
		o.BaseDir = abs
	}
	if o.ExecTimeout <= 0 {
		o.ExecTimeout = runtime.DefaultExecTimeout
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = runtime.DefaultMaxOutputBytes
	}
	if o.MaxUploadBytes <= 0 {
		o.MaxUploadBytes = runtime.DefaultMaxUploadBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Ready == nil {
		base := o.BaseDir
		o.Ready = func() error {
			st, err := os.Stat(base)
			if err != nil {
				return err
			}
			if !st.IsDir() {
				return &os.PathError{Op: "stat", Path: base, Err: os.ErrInvalid}
			}
			return nil
		}
	}
	return o
}
