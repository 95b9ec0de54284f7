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
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/dataplane/tracing"
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
	logger := newLogger(&zapOpts)
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
	if soft, why := applyMemoryLimit(o.memoryLimitRatio); soft > 0 {
		log.Info("Go soft memory limit set", "bytes", soft, "from", why)
	} else {
		log.V(1).Info("Go soft memory limit left alone", "because", why)
	}
	if p, why := applyGCPercent(o.gcPercent); p > 0 {
		log.Info("Go collector target set", "percent", p, "from", why)
	} else {
		log.V(1).Info("Go collector target left alone", "because", why)
	}
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
	cfg.Wrap(metrics.CountWatches) // rest_client_requests_total counts a watch as a GET; this tells them apart
	stopTracing, tracingOn, err := tracing.Setup(context.Background(), tracing.Options{Endpoint: o.otlpEndpoint, Service: "sandbox-controller"})
	if err != nil {
		return err
	}
	defer tracing.Shutdown(stopTracing, func(err error) { log.Error(err, "tracing") })
	if tracingOn {
		cfg.Wrap(tracing.Transport) // API calls made under a reconcile's span are its children
	}
	recorder, eventGate, stopEvents, err := eventRecorders(cfg, scheme, o.eventHoldMax, o.eventQuiet, ctrl.Log.WithName("events"))
	if err != nil {
		return err
	}
	defer stopEvents()

	srv, err := listen(o, cfg, scheme, log)
	if err != nil {
		return err
	}
	mgrOpts := ctrl.Options{
		Scheme: scheme,
		Cache:  controllers.CacheOptions(controllers.OwnManagers(o.fieldManager)),
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
	if code := o.releaseCodePages && runtime.GOOS == "linux"; code || o.releaseFreeHeap {
		if err := mgr.Add(everyReplica(func(ctx context.Context) error {
			releaseWhenQuiet(ctx, ctrl.Log.WithName("memory"), code, o.releaseFreeHeap)
			return nil
		})); err != nil {
			return err
		}
	}
	if o.idleCollection {
		if err := mgr.Add(everyReplica(func(ctx context.Context) error {
			collectWhenIdle(ctx, ctrl.Log.WithName("memory"))
			return nil
		})); err != nil {
			return err
		}
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
	engine.ReadWith(mgr.GetAPIReader())
	engine.Observe(metrics.ObserveChange)
	sandboxes := &controllers.SandboxReconciler{
		Client: mgr.GetClient(), Engine: engine, Recorder: recorder("sandbox-controller"),
		ClusterDomain: o.clusterDomain, StatusCoalesceWindow: o.statusCoalesceWindow, Policy: policies, Defaults: defaults,
		ControllerNamespace: o.controllerNamespace, Templates: o.extensions,
	}
	if err := sandboxes.SetupWithManager(mgr, o.sandboxWorkers); err != nil {
		return fmt.Errorf("setting up the Sandbox controller: %w", err)
	}
	if err := setupIdleSuspend(mgr, recorder("sandbox-controller")); err != nil {
		return err
	}
	if o.extensions {
		x, err := controllers.SetupExtensions(mgr, controllers.ExtensionsOptions{
			Engine: engine, ControllerNamespace: o.controllerNamespace,
			Defaults:        defaults,
			TemplateWorkers: o.templateWorkers, WarmPoolWorkers: o.warmPoolWorkers, ClaimWorkers: o.claimWorkers,
			WarmPoolMaxBatch: o.warmPoolMaxBatch, WarmPoolGrace: o.warmPoolGrace, Policy: policies,
			Tracer: tracing.Provider(tracingOn), Sandboxes: sandboxes, Recorders: recorder,
		})
		if err != nil {
			return err
		}
		// Events also wait while claims are being served: between a
		// claim's create and its first write nothing else holds them.
		eventGate.HoldWhile(x.Queue.Serves)
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
	if err := crmetrics.Registry.Register(&metrics.SandboxCollector{
		Indexer: metrics.InformerIndexer(mgr.GetCache(), &sandboxv1beta1.Sandbox{})}); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	if o.extensions {
		if err := crmetrics.Registry.Register(&metrics.WarmPoolCollector{Reader: mgr.GetCache()}); err != nil {
			return fmt.Errorf("registering metrics: %w", err)
		}
	}
	if srv.webhookCertificate != nil {
		if err := crmetrics.Registry.Register(&metrics.CertificateCollector{Get: srv.webhookCertificate}); err != nil {
			return fmt.Errorf("registering metrics: %w", err)
		}
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
