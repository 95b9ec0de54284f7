package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agentsandbox/reconciler/apply/eventgate"
	"github.com/agentsandbox/reconciler/apply/runtimeclass"
	"github.com/agentsandbox/reconciler/dataplane/tracing"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/webhooks"
	"github.com/agentsandbox/reconciler/webhooks/certs"
)

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
	otlpEndpoint            string
	fieldManager            string
	statusCoalesceWindow    time.Duration
	eventHoldMax            time.Duration
	eventQuiet              time.Duration
	controllerNamespace     string
	controllerSA            string
	defaultRuntimeClass     string
	warmPoolGrace           time.Duration
	webhookCertManagement   string
	webhookHosts            string
	policyBundles           string
	policyDir               string
	policyReload            time.Duration
	memoryLimitRatio        float64
	gcPercent               int
	releaseCodePages        bool
	releaseFreeHeap         bool
	idleCollection          bool
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
		"self: issue the webhook's serving certificate, keep it in Secret "+certs.DefaultSecretName+" and inject the CA bundle into "+certs.DefaultWebhookConfigName+"; provided: use the files in --webhook-cert-dir (cert-manager, mounted Secret).")
	fs.StringVar(&o.webhookHosts, "webhook-hosts", "", "Extra DNS names or IPs for a self-issued serving certificate, comma-separated.")
	fs.BoolVar(&o.showVersion, "version", false, "Print the version and exit.")
	// Ours.
	fs.StringVar(&o.otlpEndpoint, "otlp-endpoint", "", tracing.FlagUsage+" Traces claim reconciles and their API calls.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "127.0.0.1:8082", "Address of the pprof endpoint, with --enable-pprof.")
	fs.StringVar(&o.fieldManager, "field-manager", "agent-sandbox-controller", "Server-side apply field manager of the objects the controller writes; status uses <field-manager>-status.")
	fs.DurationVar(&o.statusCoalesceWindow, "status-coalesce-window", 5*time.Second,
		"How long transitional status changes (a Pod starting or terminating) are held after the controller's last write for a Sandbox; in a burst (more than 50 Sandboxes waiting so, or having their Pods created or deleted), until the burst is over as long as it makes progress, and at most 120 times as long when a Pod shows trouble (unschedulable, backing off, restarted, terminating past its deadline). Resting states (Ready, Suspended, failed) are written at once. Negative writes every change at once.")
	fs.DurationVar(&o.eventHoldMax, "event-hold-max", 2*time.Second,
		"Longest an Event waits while the controller's own writes are in flight or ended less than --event-quiet ago, or claims are being served, so that Events never compete with the writes claims and Sandboxes wait for; an Event keeps the time it was recorded at. 0 sends every Event at once.")
	fs.DurationVar(&o.eventQuiet, "event-quiet", eventgate.DefaultQuiet,
		"How long after the controller's last write ends a held Event is sent (see --event-hold-max); 0 sends it as soon as no write is in flight and no claim is being served.")
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "agent-sandbox-system"
	}
	fs.StringVar(&o.controllerNamespace, "controller-namespace", ns,
		"Namespace the controller and the sandbox router run in (default: $POD_NAMESPACE, else agent-sandbox-system); the NetworkPolicies of templates and Sandboxes admit ingress from sandbox-router pods there.")
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
	fs.Float64Var(&o.memoryLimitRatio, "memory-limit-ratio", 0.9,
		"Without GOMEMLIMIT, the Go runtime's soft memory limit as this share of the container's memory limit (cgroup), so the collector works harder before the container is killed; 0 leaves it unset.")
	fs.IntVar(&o.gcPercent, "gc-percent", defaultGCPercent,
		"Without GOGC, the Go collector's target: how far the heap may grow past what was live after the last collection, in percent (Go's default is 100); 0 leaves it unset.")
	fs.BoolVar(&o.releaseCodePages, "release-code-pages", true,
		"On Linux, once quiet after starting or a wave, unmap the executable's read-only pages (code run once and not again); the page cache keeps them and what runs again is mapped again.")
	fs.BoolVar(&o.releaseFreeHeap, "release-free-heap", true,
		"Once quiet for 10 s after a wave, collect the heap and return its free pages to the operating system at once (instead of within minutes) when that gives back at least 2 MiB or an eighth of the live heap, whichever is more.")
	fs.BoolVar(&o.idleCollection, "idle-collection", true,
		"In a pause of the work (half a second with little allocated), collect the heap when a quarter or more of the collector's headroom is used, so the next burst of work starts with all of it instead of meeting a collection.")
	fs.DurationVar(&o.warmPoolGrace, "warm-pool-grace-period", 5*time.Minute,
		"How long a warm pool member may take to become Ready before its pool reports it (Progressing=False and a WarmPoolNotProgressing event).")
}

// validate rejects flag values and combinations that cannot work.
func (o *options) validate() error {
	var errs []error
	if err := tracing.CheckEndpoint(o.otlpEndpoint); err != nil {
		errs = append(errs, err)
	}
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
	if o.eventHoldMax < 0 {
		errs = append(errs, fmt.Errorf("--event-hold-max=%s: must not be negative", o.eventHoldMax))
	}
	if o.eventQuiet < 0 {
		errs = append(errs, fmt.Errorf("--event-quiet=%s: must not be negative", o.eventQuiet))
	}
	if o.gcPercent < 0 {
		errs = append(errs, fmt.Errorf("--gc-percent=%d: must not be negative", o.gcPercent))
	}
	if o.memoryLimitRatio < 0 || o.memoryLimitRatio > 1 {
		errs = append(errs, fmt.Errorf("--memory-limit-ratio=%g: must be between 0 and 1", o.memoryLimitRatio))
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
