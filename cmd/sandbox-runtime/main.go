package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/agentsandbox/reconciler/dataplane/envd"
	"github.com/agentsandbox/reconciler/dataplane/runtime"
	"github.com/agentsandbox/reconciler/dataplane/sandboxd"
	"github.com/agentsandbox/reconciler/dataplane/tracing"
	"github.com/agentsandbox/reconciler/dataplane/webguard"
)

// Build information, injected with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

type options struct {
	listenAddr        string
	restAddr          string
	grpcAddr          string
	envdAddr          string
	baseDir           string
	execTimeout       time.Duration
	maxOutputBytes    int64
	maxUploadBytes    int64
	readHeaderTimeout time.Duration
	readTimeout       time.Duration
	writeTimeout      time.Duration
	idleTimeout       time.Duration
	shutdownTimeout   time.Duration
	showVersion       bool
	warmUp            bool
	authTokenFile     string
	allowedHosts      string
	otlpEndpoint      string
	// envToken is $SANDBOX_RUNTIME_TOKEN.
	envToken string
	// token and hosts are what validate loaded from authTokenFile (or
	// envToken) and allowedHosts.
	token string
	hosts *webguard.Hosts
	// envErrs are environment variables that did not parse.
	envErrs []error
}

// bind declares the flags; their defaults come from the environment
// (upstream's variables, and ours for the limits).
func (o *options) bind(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.listenAddr, "listen-address", o.envString(getenv, "SANDBOX_LISTEN_ADDRESS", ":8888"),
		"Address to serve upstream's legacy protocol on; empty or off turns it off ($SANDBOX_LISTEN_ADDRESS).")
	fs.StringVar(&o.restAddr, "sandboxd-rest-address", o.envString(getenv, "SANDBOXD_REST_ADDRESS", ":8080"),
		"Address to serve sandboxd's REST API (/v1/files, /v1/health, /v1/metadata) on; empty or off turns it off ($SANDBOXD_REST_ADDRESS).")
	fs.StringVar(&o.grpcAddr, "sandboxd-grpc-address", o.envString(getenv, "SANDBOXD_GRPC_ADDRESS", ":9090"),
		"Address to serve sandboxd's gRPC process.v1.ProcessService on; empty or off turns it off ($SANDBOXD_GRPC_ADDRESS).")
	fs.StringVar(&o.envdAddr, "envd-address", o.envString(getenv, "SANDBOX_ENVD_ADDRESS", fmt.Sprintf(":%d", envd.Port)),
		"Address to serve the E2B in-sandbox daemon's subset (envd "+envd.Version+": process.Process, filesystem.Filesystem, /files, /health) on; "+
			"empty or off turns it off ($SANDBOX_ENVD_ADDRESS).")
	fs.StringVar(&o.baseDir, "base-dir", o.envString(getenv, "SANDBOX_BASE_DIR", runtime.DefaultBaseDir),
		"Directory commands run in and file paths are confined to; created if missing ($SANDBOX_BASE_DIR).")
	fs.DurationVar(&o.execTimeout, "exec-timeout", o.envSeconds(getenv, "SANDBOX_EXEC_TIMEOUT_SECONDS", runtime.DefaultExecTimeout),
		"How long one command may run before its process group is killed ($SANDBOX_EXEC_TIMEOUT_SECONDS, in seconds).")
	fs.Int64Var(&o.maxOutputBytes, "max-output-bytes", o.envInt(getenv, "SANDBOX_MAX_OUTPUT_BYTES", runtime.DefaultMaxOutputBytes),
		"Bytes of a command's stdout, and of its stderr, kept in the answer; the rest is dropped ($SANDBOX_MAX_OUTPUT_BYTES).")
	fs.Int64Var(&o.maxUploadBytes, "max-upload-bytes", o.envInt(getenv, "SANDBOX_MAX_UPLOAD_BYTES", runtime.DefaultMaxUploadBytes),
		"Largest file /upload accepts; larger ones get 413 ($SANDBOX_MAX_UPLOAD_BYTES).")
	fs.DurationVar(&o.readHeaderTimeout, "read-header-timeout", 10*time.Second, "How long a client may take to send a request's headers.")
	fs.DurationVar(&o.readTimeout, "read-timeout", 15*time.Minute, "How long a client may take to send a whole request (an upload included).")
	fs.DurationVar(&o.writeTimeout, "write-timeout", 15*time.Minute,
		"How long writing an answer (a download included) may take; /execute extends it past --exec-timeout by itself.")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", 2*time.Minute, "How long an idle keep-alive connection stays open.")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 20*time.Second,
		"On SIGTERM, how long running requests may finish before their commands are killed.")
	fs.StringVar(&o.authTokenFile, "auth-token-file", "",
		"File holding the token every request but the health checks (GET /, GET /v1/health) must carry in "+runtime.TokenHeader+
			" (401 otherwise; sandboxd's gRPC calls in the "+sandboxd.TokenMetadataKey+" metadata): the router's --runtime-token-file sends it. "+
			"Without this flag, $"+runtime.TokenEnv+" is the token; neither: no token needed. Read once at start; commands never see it.")
	o.envToken = getenv(runtime.TokenEnv)
	fs.StringVar(&o.allowedHosts, "allowed-hosts", o.envString(getenv, "SANDBOX_ALLOWED_HOSTS", ""),
		"Refuse (403) requests whose Host is not localhost, 127.0.0.1, [::1], an IP address or one of these comma-separated names "+
			"($SANDBOX_ALLOWED_HOSTS; legacy protocol and sandboxd REST); for a runtime listening on a developer's machine (the local cluster sets it), against DNS rebinding. "+
			"Empty: any Host (a Pod is reached by its IP or a Service name).")
	fs.StringVar(&o.otlpEndpoint, "otlp-endpoint", "", tracing.FlagUsage)
	fs.BoolVar(&o.warmUp, "warm-up", true,
		"At start, send the legacy server a health check and one command (this binary with -version) over loopback, "+
			"so that a client's first request finds its code paths warm.")
	fs.BoolVar(&o.showVersion, "version", false, "Print the version and exit.")
}

func (o *options) envString(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}

func (o *options) envSeconds(getenv func(string) string, name string, def time.Duration) time.Duration {
	v := getenv(name)
	if v == "" {
		return def
	}
	s, err := strconv.ParseFloat(v, 64)
	if err != nil || s <= 0 || s > (1<<63-1)/float64(time.Second) {
		o.envErrs = append(o.envErrs, fmt.Errorf("$%s=%q: want a positive number of seconds", name, v))
		return def
	}
	return time.Duration(s * float64(time.Second))
}

func (o *options) envInt(getenv func(string) string, name string, def int64) int64 {
	v := getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		o.envErrs = append(o.envErrs, fmt.Errorf("$%s=%q: want a positive number of bytes", name, v))
		return def
	}
	return n
}

// validate rejects values that cannot work, one message per setting, and
// loads the token and the allowed hosts.
func (o *options) validate() error {
	errs := append([]error(nil), o.envErrs...)
	if err := tracing.CheckEndpoint(o.otlpEndpoint); err != nil {
		errs = append(errs, err)
	}
	o.token = strings.TrimSpace(o.envToken)
	if o.authTokenFile != "" {
		data, err := os.ReadFile(o.authTokenFile)
		o.token = strings.TrimSpace(string(data))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--auth-token-file: %w", err))
		case o.token == "":
			errs = append(errs, fmt.Errorf("--auth-token-file %s is empty", o.authTokenFile))
		}
	}
	if o.allowedHosts != "" {
		hosts, err := webguard.ParseHosts(strings.Split(o.allowedHosts, ","))
		if err != nil {
			errs = append(errs, fmt.Errorf("--allowed-hosts: %w", err))
		}
		o.hosts = hosts
	}
	if o.baseDir == "" {
		errs = append(errs, errors.New("--base-dir must not be empty"))
	}
	for _, addr := range []*string{&o.listenAddr, &o.restAddr, &o.grpcAddr, &o.envdAddr} {
		if *addr == "off" {
			*addr = ""
		}
	}
	if o.listenAddr == "" && o.restAddr == "" && o.grpcAddr == "" && o.envdAddr == "" {
		errs = append(errs, errors.New("--listen-address, --sandboxd-rest-address, --sandboxd-grpc-address and --envd-address are all empty: nothing to serve"))
	}
	for _, d := range []struct {
		name  string
		value time.Duration
	}{
		{"--exec-timeout", o.execTimeout}, {"--read-header-timeout", o.readHeaderTimeout}, {"--read-timeout", o.readTimeout},
		{"--write-timeout", o.writeTimeout}, {"--idle-timeout", o.idleTimeout},
	} {
		if d.value <= 0 {
			errs = append(errs, fmt.Errorf("%s=%s: must be positive", d.name, d.value))
		}
	}
	if o.shutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-timeout=%s: must not be negative", o.shutdownTimeout))
	}
	if o.maxOutputBytes <= 0 {
		errs = append(errs, fmt.Errorf("--max-output-bytes=%d: must be positive", o.maxOutputBytes))
	}
	if o.maxUploadBytes <= 0 {
		errs = append(errs, fmt.Errorf("--max-upload-bytes=%d: must be positive", o.maxUploadBytes))
	}
	return errors.Join(errs...)
}

func main() {
	if err := hideToken(); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-runtime: the runtime token stays in this process's environment, which its commands can read in /proc: %v\n", err)
	}
	getenv := os.Getenv
	switch token, ok, err := handedToken(); {
	case err != nil:
		fmt.Fprintf(os.Stderr, "sandbox-runtime: reading the runtime token: %v\n", err)
		os.Exit(2)
	case ok:
		getenv = func(k string) string {
			if k == runtime.TokenEnv {
				return token
			}
			return os.Getenv(k)
		}
	}
	var o options
	fs := flag.NewFlagSet("sandbox-runtime", flag.ExitOnError)
	o.bind(fs, getenv)
	_ = fs.Parse(os.Args[1:])
	// Read by bind: gone from Go's copy of the environment, which commands
	// get theirs from, before anything runs (hideToken has kept it out of
	// the process's own).
	_ = os.Unsetenv(runtime.TokenEnv)
	if o.showVersion {
		fmt.Printf("sandbox-runtime %s (commit %s)\n", version, commit)
		return
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-runtime: %v\n", err)
		os.Exit(2)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, o, logger); err != nil {
		logger.Error("sandbox-runtime failed", "err", err)
		stop()
		os.Exit(1)
	}
}

// listeners are where each protocol is served; nil turns one off.
type listeners struct {
	legacy, rest, grpc, envd net.Listener
}

// run creates the base directory, listens and serves until ctx ends.
func run(ctx context.Context, o options, logger *slog.Logger) error {
	if err := os.MkdirAll(o.baseDir, 0o755); err != nil {
		return fmt.Errorf("base directory: %w", err)
	}
	var l listeners
	for _, x := range []struct {
		flag, addr string
		ln         *net.Listener
	}{{"--listen-address", o.listenAddr, &l.legacy}, {"--sandboxd-rest-address", o.restAddr, &l.rest}, {"--sandboxd-grpc-address", o.grpcAddr, &l.grpc},
		{"--envd-address", o.envdAddr, &l.envd}} {
		if x.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", x.addr)
		if err != nil {
			l.close()
			return fmt.Errorf("%s=%s: %w (another port, or empty to turn it off)", x.flag, x.addr, err)
		}
		*x.ln = ln
	}
	return serve(ctx, o, l, logger)
}

func (l listeners) close() {
	for _, ln := range []net.Listener{l.legacy, l.rest, l.grpc, l.envd} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}

// serve serves every protocol that has a listener until ctx ends (or one
// of them fails), then shuts down: running requests, calls and streams get
// --shutdown-timeout to finish, after which their programs' process groups
// are killed (their contexts descend from the servers') and the servers
// wait for them to answer.
func serve(ctx context.Context, o options, l listeners, logger *slog.Logger) error {
	baseCtx, killAll := context.WithCancel(context.Background())
	defer killAll()
	stopTracing, tracingOn, err := tracing.Setup(ctx, tracing.Options{Endpoint: o.otlpEndpoint, Service: "sandbox-runtime"})
	if err != nil {
		return err
	}
	defer tracing.Shutdown(stopTracing, func(err error) { logger.Warn("tracing", "err", err) })
	newHTTP := func(h http.Handler) *http.Server {
		return &http.Server{
			Handler:           h,
			ReadHeaderTimeout: o.readHeaderTimeout,
			ReadTimeout:       o.readTimeout,
			WriteTimeout:      o.writeTimeout,
			IdleTimeout:       o.idleTimeout,
			BaseContext:       func(net.Listener) context.Context { return baseCtx },
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		}
	}
	sdOpts := sandboxd.Options{
		BaseDir: o.baseDir, ExecTimeout: o.execTimeout, MaxOutputBytes: o.maxOutputBytes, MaxUploadBytes: o.maxUploadBytes,
		Logger: logger, Metadata: map[string]string{
			"SANDBOX_BASE_DIR": o.baseDir, "SANDBOX_EXEC_TIMEOUT_SECONDS": strconv.FormatFloat(o.execTimeout.Seconds(), 'f', -1, 64),
			"SANDBOX_RUNTIME_VERSION": version,
		},
		// The legacy protocol's guard: the token, the Host allowlist and
		// the cross-site refusal (GET /v1/health needs no token).
		Middleware: runtime.Guard(runtime.Options{AuthToken: o.token, AllowedHosts: o.hosts, Logger: logger}),
	}
	var servers []*http.Server
	served := make(chan error, 4)
	running := 0
	if l.legacy != nil {
		srv := newHTTP(runtime.New(runtime.Options{
			BaseDir: o.baseDir, ExecTimeout: o.execTimeout,
			MaxOutputBytes: o.maxOutputBytes, MaxUploadBytes: o.maxUploadBytes, Logger: logger,
			AuthToken: o.token, AllowedHosts: o.hosts, Tracer: tracing.Provider(tracingOn),
		}))
		servers = append(servers, srv)
		go func() { served <- srv.Serve(l.legacy) }()
		running++
		if o.warmUp {
			go warmUp(baseCtx, l.legacy.Addr(), o.token, logger)
		}
		logger.Info("serving the legacy protocol", "address", l.legacy.Addr().String())
	}
	if l.rest != nil {
		srv := newHTTP(sandboxd.NewHandler(sdOpts))
		servers = append(servers, srv)
		go func() { served <- srv.Serve(l.rest) }()
		running++
		logger.Info("serving sandboxd's REST API", "address", l.rest.Addr().String())
	}
	var e *envd.Server
	if l.envd != nil {
		e = envd.New(envd.Options{
			BaseDir: o.baseDir, MaxUploadBytes: o.maxUploadBytes, Logger: logger,
			// The same guard, GET /health open.
			Middleware: runtime.GuardWithHealth(runtime.Options{AuthToken: o.token, AllowedHosts: o.hosts, Logger: logger}, "/health"),
		})
		srv := newHTTP(e)
		// Start, Connect and WatchDir streams last as long as their
		// program or watch: no read or write deadline (the client's
		// Connect-Timeout-Ms bounds them instead).
		srv.ReadTimeout, srv.WriteTimeout = 0, 0
		servers = append(servers, srv)
		go func() { served <- srv.Serve(l.envd) }()
		running++
		logger.Info("serving envd (the E2B in-sandbox daemon)", "address", l.envd.Addr().String(), "envd_version", envd.Version)
	}
	var g *grpc.Server
	if l.grpc != nil {
		g = sandboxd.NewGRPCServer(sdOpts, sandboxd.RequireToken(o.token)...)
		go func() { served <- g.Serve(l.grpc) }()
		running++
		logger.Info("serving sandboxd's gRPC ProcessService", "address", l.grpc.Addr().String())
	}
	logger.Info("serving", "base_dir", o.baseDir, "exec_timeout", o.execTimeout,
		"token_required", o.token != "", "host_check", o.hosts != nil, "version", version, "commit", commit)

	var failed error
	select {
	case failed = <-served:
		running--
	case <-ctx.Done():
	}
	logger.Info("shutting down", "grace", o.shutdownTimeout)
	graceCtx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	stuck := false
	for _, srv := range servers {
		wg.Go(func() {
			if srv.Shutdown(graceCtx) != nil {
				mu.Lock()
				stuck = true
				mu.Unlock()
			}
		})
	}
	if g != nil {
		wg.Go(func() {
			stopped := make(chan struct{})
			go func() { g.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-graceCtx.Done():
				g.Stop() // cancels every call and stream: their programs are killed
				<-stopped
			}
		})
	}
	wg.Wait()
	if stuck {
		logger.Warn("requests still running after the grace period: killing their commands")
		killAll()
		if e != nil {
			e.Close() // envd's programs outlive their streams
		}
		// A killed command's handler answers within the runtime's wait delay.
		waitCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for _, srv := range servers {
			if err := srv.Shutdown(waitCtx); err != nil {
				_ = srv.Close()
			}
		}
		cancel()
	}
	if e != nil {
		e.Close() // background programs started through envd die with the runtime
	}
	for ; running > 0; running-- {
		if err := <-served; failed == nil && err != nil && !errors.Is(err, http.ErrServerClosed) {
			failed = err
		}
	}
	if errors.Is(failed, http.ErrServerClosed) {
		return nil
	}
	return failed
}
