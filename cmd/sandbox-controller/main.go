package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/controllers"
	"github.com/agentsandbox/reconciler/apply/metrics"
	"github.com/agentsandbox/reconciler/apply/runtimeclass"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/webhooks"
)

// Build information, injected with -ldflags "-X main.version=... -X main.commit=... -X main.date=...".
var (
	version = "dev"
	commit  = "unknown"
	date    = "unknown"
)

// leaderElectionID names the Lease the replicas compete for.
const leaderElectionID = "agent-sandbox-controller.agents.x-k8s.io"

// Leader election, in the controller's own namespace only.
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete,namespace=agent-sandbox-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=agent-sandbox-system

type options struct {
	clusterDomain           string
	metricsAddr             string
	metricsSecure           bool
	metricsCertDir          string
	probeAddr               string
	leaderElect             bool
	leaderElectionNamespace string
	extensions              bool
	qps                     float64
	burst                   int
	sandboxWorkers          int
	claimWorkers            int
	warmPoolWorkers         int
	templateWorkers         int
	warmPoolMaxBatch        int
	enablePprof             bool
	pprofAddr               string
	webhookPort             int
	webhookHost             string
	webhookCertDir          string
	enableWebhook           bool
	showVersion             bool
	fieldManager            string
	statusCoalesceWindow    time.Duration
	controllerNamespace     string
	controllerSA            string
	defaultRuntimeClass     string
	warmPoolGrace           time.Duration
	webhookCertManagement   string
	webhookHosts            string
	policyBundles           string
	policyDir               string
	policyReload            time.Duration
}

func (o *options) bind(fs *flag.FlagSet) {
	// Flags of the public controller, with its defaults.
	fs.StringVar(&o.clusterDomain, "cluster-domain", "cluster.local", "DNS domain of the cluster, for status.serviceFQDN.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; 0 disables it.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", false,
		"Serve metrics over HTTPS, only to callers whose token the API server authenticates and allows to get /metrics (ClusterRole agent-sandbox-metrics-reader); the deploy bundle sets it.")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "Directory of the metrics serving certificate (tls.crt, tls.key) with --metrics-secure; default: a self-signed one.")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "Elect a leader with a Lease so that only one replica reconciles.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (default: --controller-namespace).")
	fs.BoolVar(&o.extensions, "extensions", false, "Run the SandboxTemplate, SandboxWarmPool and SandboxClaim controllers.")
	fs.Float64Var(&o.qps, "kube-api-qps", -1, "Client-side queries per second to the API server; negative means no limit.")
	fs.IntVar(&o.burst, "kube-api-burst", 10, "Client-side burst to the API server.")
	fs.IntVar(&o.sandboxWorkers, "sandbox-concurrent-workers", 100, "Sandboxes reconciled at once.")
	fs.IntVar(&o.claimWorkers, "sandbox-claim-concurrent-workers", 50, "SandboxClaims reconciled at once (with --extensions).")
	fs.IntVar(&o.warmPoolWorkers, "sandbox-warm-pool-concurrent-workers", 1, "SandboxWarmPools reconciled at once (with --extensions).")
	fs.IntVar(&o.templateWorkers, "sandbox-template-concurrent-workers", 1, "SandboxTemplates reconciled at once (with --extensions).")
	fs.IntVar(&o.warmPoolMaxBatch, "sandbox-warm-pool-max-batch-size", 300, "Most members a warm pool creates in one pass (with --extensions).")
	fs.BoolVar(&o.enablePprof, "enable-pprof", false, "Serve Go pprof profiles on --pprof-bind-address.")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "Port of the admission webhook server.")
	fs.StringVar(&o.webhookHost, "webhook-host", "", "Address the admission webhook server listens on, e.g. 127.0.0.1; empty: every interface (in a Pod, the API server reaches it through its Service).")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "", "Directory of the webhook serving certificate (tls.crt, tls.key).")
	fs.BoolVar(&o.enableWebhook, "enable-webhook", true, "Serve the admission webhooks.")
	fs.StringVar(&o.webhookCertManagement, "webhook-cert-management", "self",
		"self: issue the webhook's serving certificate, keep it in Secret "+webhooks.DefaultSecretName+" and inject the CA bundle into "+webhooks.DefaultWebhookConfigName+"; provided: use the files in --webhook-cert-dir (cert-manager, mounted Secret).")
	fs.StringVar(&o.webhookHosts, "webhook-hosts", "", "Extra DNS names or IPs for a self-issued serving certificate, comma-separated.")
	fs.BoolVar(&o.showVersion, "version", false, "Print the version and exit.")
	// Ours.
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "127.0.0.1:8082", "Address of the pprof endpoint, with --enable-pprof.")
	fs.StringVar(&o.fieldManager, "field-manager", "agent-sandbox-controller", "Server-side apply field manager of the objects the controller writes; status uses <field-manager>-status.")
	fs.DurationVar(&o.statusCoalesceWindow, "status-coalesce-window", 5*time.Second,
		"How long transitional status changes (a Pod starting or terminating) are held after the controller's last write for a Sandbox; resting states (Ready, Suspended, failed) are written at once. Negative writes every change at once.")
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "agent-sandbox-system"
	}
	fs.StringVar(&o.controllerNamespace, "controller-namespace", ns,
		"Namespace the controller and the sandbox router run in (default: $POD_NAMESPACE, else agent-sandbox-system); template NetworkPolicies admit ingress from sandbox-router pods there.")
	fs.StringVar(&o.controllerSA, "controller-service-account", webhooks.DefaultControllerServiceAccount,
		"ServiceAccount (in --controller-namespace) the controller runs as. The webhook lets only its requests make a Sandbox or SandboxClaim controlled by a SandboxWarmPool or SandboxClaim.")
	fs.StringVar(&o.defaultRuntimeClass, "default-runtime-class", runtimeclass.Auto,
		"Runtime class of new Pods whose Sandbox or template names none (only the Pod gets it): auto, the first of "+
			strings.Join(policy.IsolatingRuntimeClasses(), ", ")+" that the cluster has, followed as RuntimeClasses come and go; none; or a RuntimeClass name.")
	fs.StringVar(&o.policyBundles, "policy-bundles", strings.Join(policy.DefaultBundles, ","),
		"Cluster-wide modes of the built-in policy bundles ("+strings.Join(policy.Bundles(), ", ")+"), comma-separated bundle[=mode] with mode enforce (the default for a bare name), warn, audit or off; bundles not named are off; \"none\" for all off. "+
			"A namespace overrides a bundle's mode with the label "+policy.ModeLabelPrefix+"<bundle>=<mode>; --controller-namespace and kube-system are never blocked (enforce warns there).")
	fs.StringVar(&o.policyDir, "policy-dir", "",
		"Directory of ValidatingAdmissionPolicy YAML (policies, bindings, params) enforced in addition to the bundles; reloaded on change.")
	fs.DurationVar(&o.policyReload, "policy-reload-interval", 10*time.Second, "How often --policy-dir is checked for changes.")
	fs.DurationVar(&o.warmPoolGrace, "warm-pool-grace-period", 5*time.Minute,
		"How long a warm pool member may take to become Ready before its pool reports it (Progressing=False and a WarmPoolNotProgressing event).")
}

// validate rejects flag values and combinations that cannot work.
func (o *options) validate() error {
	var errs []error
	if len(validation.IsDNS1123Subdomain(o.clusterDomain)) > 0 {
		errs = append(errs, fmt.Errorf("--cluster-domain=%q is not a DNS domain", o.clusterDomain))
	}
	for _, f := range []struct {
		name  string
		value int
	}{
		{"--sandbox-concurrent-workers", o.sandboxWorkers}, {"--sandbox-claim-concurrent-workers", o.claimWorkers},
		{"--sandbox-warm-pool-concurrent-workers", o.warmPoolWorkers}, {"--sandbox-template-concurrent-workers", o.templateWorkers},
		{"--sandbox-warm-pool-max-batch-size", o.warmPoolMaxBatch},
	} {
		if f.value < 1 {
			errs = append(errs, fmt.Errorf("%s=%d: must be at least 1", f.name, f.value))
		}
	}
	if o.burst < 1 && o.qps > 0 {
		errs = append(errs, fmt.Errorf("--kube-api-burst=%d: must be at least 1 when --kube-api-qps is set", o.burst))
	}
	if len(validation.IsDNS1123Label(o.controllerNamespace)) > 0 {
		errs = append(errs, fmt.Errorf("--controller-namespace=%q is not a namespace name", o.controllerNamespace))
	}
	if len(validation.IsDNS1123Subdomain(o.controllerSA)) > 0 {
		errs = append(errs, fmt.Errorf("--controller-service-account=%q is not a ServiceAccount name", o.controllerSA))
	}
	if err := runtimeclass.CheckSetting(o.defaultRuntimeClass); err != nil {
		errs = append(errs, err)
	}
	if _, err := o.policyConfig(); err != nil {
		errs = append(errs, err)
	}
	if o.policyReload <= 0 {
		errs = append(errs, fmt.Errorf("--policy-reload-interval=%s: must be positive", o.policyReload))
	}
	if o.warmPoolGrace <= 0 {
		errs = append(errs, fmt.Errorf("--warm-pool-grace-period=%s: must be positive", o.warmPoolGrace))
	}
	if o.webhookCertManagement != "self" && o.webhookCertManagement != "provided" {
		errs = append(errs, fmt.Errorf("--webhook-cert-management=%q: want self or provided", o.webhookCertManagement))
	}
	if o.enableWebhook && o.webhookCertManagement == "provided" && o.webhookCertDir == "" {
		errs = append(errs, errors.New("--webhook-cert-management=provided needs --webhook-cert-dir with tls.crt and tls.key"))
	}
	if o.metricsCertDir != "" && !o.metricsSecure {
		errs = append(errs, errors.New("--metrics-cert-dir needs --metrics-secure"))
	}
	if o.webhookPort < 1 || o.webhookPort > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port=%d: not a port", o.webhookPort))
	}
	if strings.TrimSpace(o.fieldManager) == "" {
		errs = append(errs, errors.New("--field-manager must not be empty"))
	}
	return errors.Join(errs...)
}

// policyConfig turns the policy flags into a policy configuration and
// loads it once, so that invalid policies stop the controller at start.
func (o *options) policyConfig() (policy.Config, error) {
	var c policy.Config
	spec := o.policyBundles
	if strings.TrimSpace(spec) == "none" {
		spec = ""
	}
	modes, err := policy.ParseModes(spec)
	if err != nil {
		return c, fmt.Errorf("--policy-bundles: %w", err)
	}
	c.Modes = modes
	c.Dir = o.policyDir
	if _, err := policy.LoadConfig(c); err != nil {
		return c, fmt.Errorf("--policy-bundles/--policy-dir: %w", err)
	}
	return c, nil
}

// everyReplica is a runnable that runs on every replica, leader or not
// (webhooks are served by all of them).
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }

func main() {
	var o options
	o.bind(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()

	if o.showVersion {
		fmt.Printf("sandbox-controller %s (commit %s, built %s, %s)\n", version, commit, date, runtime.Version())
		return
	}
	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	// client-go (reflectors, leader election) logs through klog: send it
	// to the same structured log.
	klog.SetLogger(logger.WithName("client-go"))
	log := ctrl.Log.WithName("setup")
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-controller: invalid flags:")
		for _, e := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(os.Stderr, "  "+e)
		}
		os.Exit(2)
	}
	if err := run(o); err != nil {
		log.Error(err, "controller stopped")
		os.Exit(1)
	}
}

func run(o options) error {
	log := ctrl.Log.WithName("setup")
	scheme := clientgoscheme.Scheme
	for _, add := range []func(*k8sruntime.Scheme) error{sandboxv1beta1.AddToScheme, extv1beta1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	cfg.UserAgent = "sandbox-controller/" + version

	srv, err := listen(o, cfg, scheme, log)
	if err != nil {
		return err
	}
	mgrOpts := ctrl.Options{
		Scheme: scheme,
		Cache:  controllers.CacheOptions(),
		// Our own servers (servers.go) have timeouts; controller-runtime's
		// metrics, probe and pprof servers are off.
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              leaderElectionID,
		LeaderElectionNamespace:       cmp.Or(o.leaderElectionNamespace, o.controllerNamespace),
		LeaderElectionReleaseOnCancel: true,
	}
	if srv.webhook != nil {
		mgrOpts.WebhookServer = srv.webhook
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}

	policyConfig, err := o.policyConfig()
	if err != nil {
		return err
	}
	policies := &policy.Holder{
		NamespaceLabels: controllers.NamespaceLabels(mgr.GetClient()),
		Exempt:          []string{o.controllerNamespace, metav1.NamespaceSystem},
	}
	set, err := policy.LoadConfig(policyConfig)
	if err != nil {
		return err
	}
	policies.Set(set)
	metrics.PolicyLoaded(set.Policies())
	log.Info("policies loaded", "policies", set.Policies(), "modes", set.Defaults().String())
	if policyConfig.Dir != "" {
		if err := mgr.Add(everyReplica(func(ctx context.Context) error {
			policy.Watch(ctx, policyConfig, policies, o.policyReload, func(s *policy.Set) {
				metrics.PolicyLoaded(s.Policies())
				log.Info("policies reloaded", "policies", s.Policies())
			}, func(err error) {
				metrics.PolicyLoadErrors.Inc()
				log.Error(err, "policies not reloaded; the last good set stays in force")
			})
			return nil
		})); err != nil {
			return err
		}
	}

	defaults, err := runtimeClassDefaults(o, mgr)
	if err != nil {
		return err
	}
	engine := ssa.New(mgr.GetClient(), o.fieldManager, o.fieldManager+"-status")
	engine.Observe(metrics.ObserveChange)
	sandboxes := &controllers.SandboxReconciler{
		Client: mgr.GetClient(), Engine: engine, Recorder: mgr.GetEventRecorder("sandbox-controller"),
		ClusterDomain: o.clusterDomain, StatusCoalesceWindow: o.statusCoalesceWindow, Policy: policies, Defaults: defaults,
	}
	if err := sandboxes.SetupWithManager(mgr, o.sandboxWorkers); err != nil {
		return fmt.Errorf("setting up the Sandbox controller: %w", err)
	}
	if err := setupIdleSuspend(mgr); err != nil {
		return err
	}
	if o.extensions {
		if _, err := controllers.SetupExtensions(mgr, controllers.ExtensionsOptions{
			Engine: engine, ControllerNamespace: o.controllerNamespace,
			Defaults:        defaults,
			TemplateWorkers: o.templateWorkers, WarmPoolWorkers: o.warmPoolWorkers, ClaimWorkers: o.claimWorkers,
			WarmPoolMaxBatch: o.warmPoolMaxBatch, WarmPoolGrace: o.warmPoolGrace, Policy: policies,
		}); err != nil {
			return err
		}
	}
	if o.enableWebhook {
		mgr.GetWebhookServer().Register(webhooks.ConvertPath, webhooks.Converter{})
		mgr.GetWebhookServer().Register(webhooks.ValidatePath, &webhook.Admission{Handler: &webhooks.Validator{
			Policy: policies, Reader: mgr.GetClient(), ControllerNamespace: o.controllerNamespace, Observe: metrics.ObserveAdmission,
			Defaults:       defaults,
			ControllerUser: webhooks.ServiceAccountUser(o.controllerNamespace, o.controllerSA),
		}})
		if err := srv.probes.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return err
		}
	}

	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agent_sandbox_build_info",
		Help: "Build information of the running controller; the value is always 1.",
	}, []string{"version", "commit", "go_version"})
	buildInfo.WithLabelValues(version, commit, runtime.Version()).Set(1)
	if err := crmetrics.Registry.Register(buildInfo); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	if err := crmetrics.Registry.Register(&metrics.SandboxCollector{Reader: mgr.GetCache()}); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}

	if err := srv.probes.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	// Ready once the caches have synced: before that the controller would
	// act on an empty view of the cluster.
	if err := srv.probes.AddReadyzCheck("caches", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("caches not synced")
		}
		return nil
	}); err != nil {
		return err
	}

	// Not ready while the API server cannot be reached: the controller
	// cannot act on anything then, and says so instead of looking healthy.
	apiserver, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	if err := srv.probes.AddReadyzCheck("apiserver", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 2*time.Second)
		defer cancel()
		if _, err := apiserver.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
			return fmt.Errorf("API server not reachable: %w", err)
		}
		return nil
	}); err != nil {
		return err
	}

	if err := srv.add(mgr, o); err != nil {
		return err
	}
	log.Info("starting", "version", version, "commit", commit, "leaderElection", o.leaderElect)
	return mgr.Start(ctrl.SetupSignalHandler())
}
