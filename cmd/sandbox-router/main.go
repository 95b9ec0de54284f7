package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/e2b"
	"github.com/agentsandbox/reconciler/dataplane/resume"
	"github.com/agentsandbox/reconciler/dataplane/router"
	"github.com/agentsandbox/reconciler/dataplane/tracing"
	"github.com/agentsandbox/reconciler/dataplane/webguard"
)

// Build information, injected with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

type options struct {
	httpAddr, metricsAddr                 string
	transport, auth                       string
	authCacheTTL, authRefusal             time.Duration
	authAudiences                         string
	authNewQPS, authReviewQPS             float64
	authNewBurst, authBurst               int
	runtimeTokenFile                      string
	clusterDomain                         string
	dnsFallback, allowLocal               bool
	trustPortForward, routeByClaim        bool
	namespaces                            string
	proxyTimeout, maxTimeout              time.Duration
	resolveWait, claimWait, wsMaxLifetime time.Duration
	resumeTimeout, activityMax            time.Duration
	retries                               router.UpstreamRetries
	maxBody                               int64
	maxHeaderBytes                        int
	readHeaderTimeout, idle               time.Duration
	shutdownTimeout, pfIdle               time.Duration
	pfPrewarm                             int
	shutdownDelay                         time.Duration
	qps                                   float64
	burst                                 int
	showVersion                           bool
	allowedHosts                          string
	otlpEndpoint                          string
	e2b                                   e2bOptions
}

func (o *options) bind(fs *flag.FlagSet) {
	// Names and defaults of upstream's router where it has the flag; its
	// CLUSTER_DOMAIN and PROXY_TIMEOUT_SECONDS variables set the defaults.
	fs.StringVar(&o.httpAddr, "http-bind-address", ":8080", "Address of the proxy port (upstream's Service sandbox-router-svc:8080).")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":9090", "Address of /metrics, /healthz and /readyz; 0 disables it.")
	fs.StringVar(&o.clusterDomain, "cluster-domain", envOr("CLUSTER_DOMAIN", "cluster.local"), "Cluster DNS domain, for the DNS fallback.")
	fs.DurationVar(&o.proxyTimeout, "proxy-timeout", envSeconds("PROXY_TIMEOUT_SECONDS", 180*time.Second), "Timeout of a request without a valid X-Sandbox-Timeout.")
	fs.Int64Var(&o.maxBody, "max-request-body-bytes", 256<<20, "Largest request body (413 beyond); 0: no limit.")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "On SIGTERM, how long open requests and WebSocket sessions may take to finish.")
	fs.DurationVar(&o.shutdownDelay, "shutdown-delay", 0, "On SIGTERM, how long to go on serving new requests (while /readyz fails) before stopping, so that load balancers and Service endpoints stop sending first.")
	// Ours.
	fs.StringVar(&o.transport, "transport", "direct", "How pods are reached: direct (their IPs), port-forward (the API server's pods/portforward, for clusters whose pod IPs the router cannot reach), or kwok (a local cluster run by kwok: dial the address each Pod's kwok PortForward object gives its port, as a pod network would; needs --allow-local-addresses for loopback ones).")
	fs.StringVar(&o.auth, "auth", "tokenreview", "tokenreview: a caller needs a bearer token the API server authenticates (TokenReview) whose user may create sandboxes/exec (group agents.x-k8s.io) on the Sandbox (SubjectAccessReview), as kubectl exec needs pods/exec; none: every caller is let through (only where the network already limits who reaches the router).")
	fs.BoolVar(&o.trustPortForward, "trust-port-forward", false, "Let requests that reach the proxy on a loopback address of the router's Pod through without a token: there only the API server's pods/portforward connects (kubectl port-forward, upstream's SDKs in their port-forward modes), which already required create on pods/portforward of this Pod in its namespace. Everything else is authorized by --auth. Not with a sidecar that delivers inbound traffic over loopback, nor with host networking.")
	fs.DurationVar(&o.authCacheTTL, "auth-cache-ttl", 10*time.Second, "How long a positive TokenReview or SubjectAccessReview is reused; 0 asks every time.")
	fs.DurationVar(&o.authRefusal, "auth-refusal-cache-ttl", 5*time.Second, "How long a refusal (a token the API server did not authenticate, an access it denied) is reused; 0 asks every time.")
	fs.StringVar(&o.authAudiences, "auth-audiences", "", "Audiences a token must be issued for, comma-separated; empty: the API server's.")
	fs.Float64Var(&o.authNewQPS, "auth-new-token-qps", 20, "TokenReviews per second of tokens the router has not seen authenticated in the last hour, all callers together (a quarter of it per client address); beyond it such requests are refused 429 at once, so made-up tokens cannot starve known callers.")
	fs.IntVar(&o.authNewBurst, "auth-new-token-burst", 40, "Burst of --auth-new-token-qps.")
	fs.Float64Var(&o.authReviewQPS, "auth-review-qps", 100, "TokenReviews per second of tokens seen authenticated, and SubjectAccessReviews: a budget of their own that made-up tokens never reach.")
	fs.IntVar(&o.authBurst, "auth-review-burst", 200, "Burst of --auth-review-qps.")
	fs.StringVar(&o.runtimeTokenFile, "runtime-token-file", "", "File holding a shared secret sent to every sandbox in the X-Sandbox-Runtime-Token header (a client's own header of that name is always dropped), for runtimes that answer only requests through the router; empty: none is sent.")
	fs.BoolVar(&o.dnsFallback, "dns-fallback", false, "Send a request for a Sandbox the cache does not hold to X-Sandbox-Pod-IP, else <id>.<ns>.svc.<cluster-domain> (upstream's behaviour), resolved by the router: every address it resolves to must pass the rules of X-Sandbox-Pod-IP (no loopback, link-local or metadata address) and the request goes to the address checked; off: 404. Only with --auth=none: the caller picks where the request goes.")
	fs.BoolVar(&o.allowLocal, "allow-local-addresses", false, "Dial loopback and link-local addresses (X-Sandbox-Pod-IP and Pod IPs); for tests and local clusters only.")
	fs.StringVar(&o.namespaces, "namespaces", "", "Only route to sandboxes in these namespaces, comma-separated (and watch only these); empty: all.")
	fs.DurationVar(&o.maxTimeout, "max-timeout", 10*time.Minute, "Largest X-Sandbox-Timeout honoured; longer ones are cut to it.")
	fs.BoolVar(&o.routeByClaim, "route-by-claim", false, "Route a request that names only its claim (X-Sandbox-Claim-UID, no X-Sandbox-ID) to the Sandbox that claim controls. It trusts Sandboxes' controller references to SandboxClaims: turn it on only where the controller's ownership webhook refuses them from anyone but the controller (the deploy bundle does).")
	fs.DurationVar(&o.claimWait, "claim-wait", 30*time.Second, "How long a request that names only its claim (X-Sandbox-Claim-UID, no X-Sandbox-ID) waits for the claim to control a routable Sandbox before it is refused 404; the request's timeout bounds it too.")
	fs.DurationVar(&o.resolveWait, "resolve-wait", 2*time.Second, "How long a request waits for the router's cache to show its Sandbox routable (just created, claimed or Ready) before it is refused.")
	fs.DurationVar(&o.resumeTimeout, "resume-timeout", 2*time.Minute, "How long a request for a Suspended Sandbox that opted in to resume on connect (annotation agents.x-k8s.io/resume-on-connect or idle-timeout) waits for the router's resume to make it routable, and a request for such a Sandbox that is starting waits for it; X-Sandbox-Timeout bounds it too.")
	fs.IntVar(&o.retries.Max, "upstream-max-retries", router.DefaultUpstreamRetries.Max, "How many times a request is sent to its sandbox again when the connection fails before the sandbox got it (refused, not resolved, the port-forward stream not opened): such a request never reached the sandbox, so any method is sent again; the answer to the last try carries X-Sandbox-Not-Forwarded: true. 0: never.")
	fs.DurationVar(&o.retries.Initial, "upstream-retry-initial-delay", router.DefaultUpstreamRetries.Initial, "Wait before the first such retry; each next wait doubles, up to --upstream-retry-max-delay.")
	fs.DurationVar(&o.retries.MaxDelay, "upstream-retry-max-delay", router.DefaultUpstreamRetries.MaxDelay, "Longest wait between two such retries.")
	fs.DurationVar(&o.activityMax, "activity-interval", 30*time.Second, "Longest interval between two last-activity writes to a Sandbox with traffic and idle suspend (annotation agents.x-k8s.io/idle-timeout; half its idle timeout when shorter).")
	fs.DurationVar(&o.wsMaxLifetime, "websocket-max-lifetime", 24*time.Hour, "Longest WebSocket (upgraded) session; 0: no limit.")
	fs.IntVar(&o.maxHeaderBytes, "max-header-bytes", 64<<10, "Largest request headers.")
	fs.DurationVar(&o.readHeaderTimeout, "read-header-timeout", 10*time.Second, "How long a client may take to send request headers.")
	fs.DurationVar(&o.idle, "idle-timeout", 90*time.Second, "How long an idle keep-alive client connection is kept.")
	fs.DurationVar(&o.pfIdle, "port-forward-idle-timeout", 15*time.Minute, "With --transport=port-forward, close a pod's port-forward connection idle this long.")
	fs.IntVar(&o.pfPrewarm, "port-forward-prewarm", 128, "With --transport=port-forward, connect ahead to the Pods of at most this many Ready, unclaimed warm pool members, so that a claim's first request does not wait for a port-forward through the API server (nothing is sent on them before a request is authorized and routed); 0: off.")
	fs.Float64Var(&o.qps, "kube-api-qps", 50, "Client-side queries per second to the API server (resume and activity writes, events; reviews have their own budget, --auth-*-qps); negative: no limit.")
	fs.IntVar(&o.burst, "kube-api-burst", 100, "Client-side burst to the API server.")
	fs.StringVar(&o.allowedHosts, "allowed-hosts", "", "Refuse (403) requests whose Host is not localhost, 127.0.0.1, [::1], an IP address or one of these comma-separated names, and requests from pages of other sites (a foreign Origin, Sec-Fetch-Site: cross-site): for a router listening on a developer's machine (the local cluster sets it), against DNS rebinding and CSRF. Empty: no such check.")
	fs.StringVar(&o.otlpEndpoint, "otlp-endpoint", "", tracing.FlagUsage)
	fs.BoolVar(&o.showVersion, "version", false, "Print the version and exit.")
	o.e2b.bind(fs)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envSeconds(name string, def time.Duration) time.Duration {
	if f, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil && f > 0 {
		return time.Duration(f * float64(time.Second))
	}
	return def
}

func (o *options) validate() error {
	var errs []error
	if err := tracing.CheckEndpoint(o.otlpEndpoint); err != nil {
		errs = append(errs, err)
	}
	if o.transport != "direct" && o.transport != "port-forward" && o.transport != "kwok" {
		errs = append(errs, fmt.Errorf("--transport=%q: want direct, port-forward or kwok", o.transport))
	}
	if o.auth != "none" && o.auth != "tokenreview" {
		errs = append(errs, fmt.Errorf("--auth=%q: want none or tokenreview", o.auth))
	}
	if o.dnsFallback && o.auth == "tokenreview" {
		// The access check is on the name; the fallback goes where the
		// caller's header, or a Service of the caller's namespace, says:
		// another tenant's Pod as well as anything.
		errs = append(errs, errors.New("--dns-fallback with --auth=tokenreview: the fallback sends a request for a Sandbox the router does not hold to the caller's X-Sandbox-Pod-IP or to a Service of the caller's namespace, which may point at another tenant's sandbox, so a caller's access to the name it asked for would not cover where the request goes; it is upstream's behaviour for a router every caller may use (--auth=none)"))
	}
	if len(validation.IsDNS1123Subdomain(o.clusterDomain)) > 0 {
		errs = append(errs, fmt.Errorf("--cluster-domain=%q is not a DNS domain", o.clusterDomain))
	}
	for _, ns := range splitList(o.namespaces) {
		if len(validation.IsDNS1123Label(ns)) > 0 {
			errs = append(errs, fmt.Errorf("--namespaces: %q is not a namespace name", ns))
		}
	}
	for _, d := range []struct {
		name  string
		value time.Duration
	}{{"--proxy-timeout", o.proxyTimeout}, {"--max-timeout", o.maxTimeout}, {"--shutdown-timeout", o.shutdownTimeout},
		{"--read-header-timeout", o.readHeaderTimeout}, {"--idle-timeout", o.idle},
		{"--resume-timeout", o.resumeTimeout}, {"--activity-interval", o.activityMax}} {
		if d.value <= 0 {
			errs = append(errs, fmt.Errorf("%s=%s: must be positive", d.name, d.value))
		}
	}
	for _, d := range []struct {
		name  string
		value time.Duration
	}{{"--shutdown-delay", o.shutdownDelay}, {"--resolve-wait", o.resolveWait}, {"--claim-wait", o.claimWait}, {"--websocket-max-lifetime", o.wsMaxLifetime}, {"--auth-cache-ttl", o.authCacheTTL}, {"--auth-refusal-cache-ttl", o.authRefusal}, {"--port-forward-idle-timeout", o.pfIdle},
		{"--upstream-retry-initial-delay", o.retries.Initial}, {"--upstream-retry-max-delay", o.retries.MaxDelay}} {
		if d.value < 0 {
			errs = append(errs, fmt.Errorf("%s=%s: must not be negative", d.name, d.value))
		}
	}
	if o.retries.Max < 0 {
		errs = append(errs, fmt.Errorf("--upstream-max-retries=%d: must not be negative", o.retries.Max))
	}
	if o.maxTimeout < o.proxyTimeout {
		errs = append(errs, fmt.Errorf("--max-timeout=%s is shorter than --proxy-timeout=%s", o.maxTimeout, o.proxyTimeout))
	}
	if o.pfPrewarm < 0 {
		errs = append(errs, fmt.Errorf("--port-forward-prewarm=%d: must not be negative", o.pfPrewarm))
	}
	if o.maxBody < 0 {
		errs = append(errs, fmt.Errorf("--max-request-body-bytes=%d: must not be negative", o.maxBody))
	}
	if o.maxHeaderBytes < 4<<10 {
		errs = append(errs, fmt.Errorf("--max-header-bytes=%d: must be at least 4096", o.maxHeaderBytes))
	}
	if o.allowedHosts != "" {
		if _, err := webguard.ParseHosts(splitList(o.allowedHosts)); err != nil {
			errs = append(errs, fmt.Errorf("--allowed-hosts: %w", err))
		}
	}
	if o.authNewQPS <= 0 || o.authReviewQPS <= 0 || o.authNewBurst < 1 || o.authBurst < 1 {
		errs = append(errs, errors.New("--auth-new-token-qps, --auth-review-qps and their bursts must be positive"))
	}
	if o.e2b.enabled {
		if err := o.e2b.validate(o.auth); err != nil {
			errs = append(errs, err)
		}
	}
	if o.burst < 1 && o.qps > 0 {
		errs = append(errs, fmt.Errorf("--kube-api-burst=%d: must be at least 1 when --kube-api-qps is set", o.burst))
	}
	return errors.Join(errs...)
}

// readRuntimeToken reads --runtime-token-file: the secret, without
// surrounding white space (a trailing newline); empty path: none.
func readRuntimeToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--runtime-token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	switch {
	case token == "":
		return "", fmt.Errorf("--runtime-token-file %s is empty", path)
	case strings.ContainsAny(token, "\r\n\x00"):
		return "", fmt.Errorf("--runtime-token-file %s: the token must be one line", path)
	}
	return token, nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func main() {
	var o options
	o.bind(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	if o.showVersion {
		fmt.Printf("sandbox-router %s (commit %s, %s)\n", version, commit, runtime.Version())
		return
	}
	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger.WithName("client-go"))
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-router: invalid flags:")
		for _, e := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(os.Stderr, "  "+e)
		}
		os.Exit(2)
	}
	if err := run(ctrl.SetupSignalHandler(), o); err != nil {
		logger.Error(err, "router stopped")
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	log := ctrl.Log.WithName("router")
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	cfg.UserAgent = "sandbox-router/" + version
	stopTracing, tracingOn, err := tracing.Setup(ctx, tracing.Options{Endpoint: o.otlpEndpoint, Service: "sandbox-router"})
	if err != nil {
		return err
	}
	defer tracing.Shutdown(stopTracing, func(err error) { log.Error(err, "tracing") })
	if tracingOn {
		cfg.Wrap(tracing.Transport) // API calls made for a request (reviews, resumes) join its trace
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	build := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sandbox_router_build_info", Help: "The router's build.",
		ConstLabels: prometheus.Labels{"version": version, "commit": commit, "go_version": runtime.Version()}})
	build.Set(1)
	reg.MustRegister(build)
	metrics := router.NewMetrics(reg)

	var pf *router.PortForward
	cacheOpts := router.CacheOptions{Namespaces: splitList(o.namespaces), Claims: o.e2b.enabled, TrimClaim: e2b.TrimClaim,
		Changes: &router.Changes{}}
	if o.transport == "port-forward" {
		dial, err := router.APIServerDialer(cfg)
		if err != nil {
			return fmt.Errorf("port-forward transport: %w", err)
		}
		pf = router.NewPortForward(dial, o.pfIdle, metrics)
		cacheOpts.OnPodGone = pf.Forget
		if o.pfPrewarm > 0 {
			pf.SetPrewarm(o.pfPrewarm)
			cacheOpts.OnPoolPod = func(p *corev1.Pod, unclaimedReady bool) {
				if unclaimedReady {
					pf.Prewarm(p.UID, p.Namespace, p.Name)
				} else {
					pf.Unwarm(p.UID)
				}
			}
		}
	}
	var kwok *router.KwokForwards
	if o.transport == "kwok" {
		if kwok, err = router.NewKwokForwards(ctx, cfg, cacheOpts.Namespaces, o.allowLocal); err != nil {
			return fmt.Errorf("kwok transport: %w", err)
		}
		cacheOpts.OnPodGone = kwok.Forget
	}
	cache, err := router.NewCache(ctx, cfg, cacheOpts)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var authz router.Authorizer
	var tr *router.TokenReview
	if o.auth == "tokenreview" || (o.e2b.enabled && o.e2b.auth == "tokenreview") {
		// Reviews have a client, and a budget, of their own: the writes,
		// events and the cache's watches never wait behind them.
		rcfg := rest.CopyConfig(cfg)
		rcfg.QPS, rcfg.Burst = float32(o.authNewQPS+o.authReviewQPS), o.authNewBurst+o.authBurst
		reviews, err := kubernetes.NewForConfig(rcfg)
		if err != nil {
			return err
		}
		tr = router.NewTokenReview(reviews, router.TokenReviewOptions{
			CacheTTL: o.authCacheTTL, RefusalTTL: o.authRefusal, Audiences: splitList(o.authAudiences), Metrics: metrics,
			Budget: router.NewReviewBudget(router.ReviewBudgetOptions{NewTokenQPS: o.authNewQPS, NewTokenBurst: o.authNewBurst,
				KnownQPS: o.authReviewQPS, KnownBurst: o.authBurst}),
		})
		if o.auth == "tokenreview" {
			authz = tr
		}
	}
	if o.trustPortForward {
		authz = router.TrustPortForward{Next: authz}
		log.Info("--trust-port-forward: requests that reach the proxy on this Pod's loopback address (through pods/portforward) need no token")
	}
	if o.auth == "none" {
		log.Info("--auth=none: every caller that reaches the proxy port may run code in every sandbox it routes to; use it only where the network already limits who reaches the router")
	}
	runtimeToken, err := readRuntimeToken(o.runtimeTokenFile)
	if err != nil {
		return err
	}
	transport := router.NewTransport(pf)
	if kwok != nil {
		transport = router.NewKwokTransport(kwok)
	}
	defer transport.CloseIdleConnections()

	// Resume on connect and activity reports: the router's only writes to
	// Sandboxes, each under its own field manager.
	sandboxes, err := resume.NewREST(cfg, nil)
	if err != nil {
		return fmt.Errorf("sandbox client: %w", err)
	}
	writer := &resume.Writer{REST: sandboxes}
	activity := router.NewActivityReporter(writer.ReportActivity, metrics, log.WithName("activity"))
	eventScheme := apiruntime.NewScheme()
	if err := sandboxv1beta1.AddToScheme(eventScheme); err != nil {
		return err
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	defer broadcaster.Shutdown()
	limits := router.Limits{DefaultTimeout: o.proxyTimeout, MaxTimeout: o.maxTimeout, AllowLocalAddresses: o.allowLocal}
	handler := router.NewHandler(router.Options{
		Resolver: &router.CacheResolver{Reader: cache, DNSFallback: o.dnsFallback, ClusterDomain: o.clusterDomain, Namespaces: cacheOpts.Namespaces,
			AllowLocalAddresses: o.allowLocal},
		Transport:            transport,
		Authorizer:           authz,
		RuntimeToken:         runtimeToken,
		Limits:               limits,
		ResolveWait:          o.resolveWait,
		ClaimWait:            o.claimWait,
		RouteByClaim:         o.routeByClaim,
		Changes:              cacheOpts.Changes,
		Resume:               writer,
		ResumeTimeout:        o.resumeTimeout,
		UpstreamRetries:      o.retries,
		Events:               broadcaster.NewRecorder(eventScheme, "sandbox-router"),
		Activity:             activity,
		ActivityInterval:     o.activityMax,
		WebSocketMaxLifetime: o.wsMaxLifetime,
		MaxRequestBodyBytes:  o.maxBody,
		Metrics:              metrics,
		Log:                  log,
		Tracer:               tracing.Provider(tracingOn),
	})

	var front http.Handler
	var keyCache ctrlcache.Cache
	if o.e2b.enabled {
		if front, keyCache, err = e2bFront(o.e2b, cfg, cache, handler, tr, limits, o.resolveWait, cacheOpts.Changes, log); err != nil {
			return err
		}
	}

	// On SIGTERM: unready at once, serving until --shutdown-delay has
	// passed, then stop (draining open requests for --shutdown-timeout).
	var synced, stopping atomic.Bool
	base, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go func() {
		select {
		case <-ctx.Done():
			stopping.Store(true)
			select {
			case <-time.After(o.shutdownDelay):
			case <-base.Done():
			}
			stop()
		case <-base.Done():
		}
	}()
	g, gctx := errgroup.WithContext(base)
	g.Go(func() error { return cache.Start(gctx) })
	if keyCache != nil {
		g.Go(func() error { return keyCache.Start(gctx) })
	}
	if err := broadcaster.StartRecordingToSinkWithContext(gctx); err != nil {
		return fmt.Errorf("recording events: %w", err)
	}
	g.Go(func() error {
		activity.Run(gctx, time.Second)
		return nil
	})
	if o.metricsAddr != "" && o.metricsAddr != "0" {
		l, err := net.Listen("tcp", o.metricsAddr)
		if err != nil {
			return fmt.Errorf("listening on --metrics-bind-address: %w", err)
		}
		ready := func() error {
			switch {
			case stopping.Load() || gctx.Err() != nil:
				return errors.New("shutting down")
			case !synced.Load():
				return errors.New("the Sandbox and Pod caches have not synced")
			}
			return nil
		}
		g.Go(func() error { return router.ServeAdmin(gctx, l, router.AdminHandler(reg, ready)) })
		log.Info("serving metrics and probes", "address", l.Addr().String())
	}
	g.Go(func() error {
		if keyCache != nil && !keyCache.WaitForCacheSync(gctx) {
			return errors.New("the API key Secret cache did not sync (may the router list and watch Secrets in --e2b-api-key-namespace?)")
		}
		if !cache.WaitForCacheSync(gctx) {
			return errors.New("the Sandbox and Pod caches did not sync (are the CRDs installed, and may the router list and watch sandboxes and pods?)")
		}
		synced.Store(true)
		l, err := net.Listen("tcp", o.httpAddr)
		if err != nil {
			return fmt.Errorf("listening on --http-bind-address: %w", err)
		}
		log.Info("routing", "address", l.Addr().String(), "transport", o.transport, "auth", o.auth, "e2b", o.e2b.enabled, "version", version)
		so := router.ServerOptions{
			ReadHeaderTimeout: o.readHeaderTimeout, IdleTimeout: o.idle, MaxHeaderBytes: o.maxHeaderBytes, ShutdownTimeout: o.shutdownTimeout,
			Front: front,
		}
		if o.allowedHosts != "" {
			so.AllowedHosts, _ = webguard.ParseHosts(splitList(o.allowedHosts)) // validated
		}
		return router.Serve(gctx, l, handler, so)
	})
	err = g.Wait()
	if stopping.Load() && err == nil {
		log.Info("stopped")
	}
	return err
}
