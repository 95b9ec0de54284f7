package controllers

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/metrics"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// Event reasons we add for conditions users must act on.
const (
	EventPodTemplateDrift = sandboxv1beta1.EventPodTemplateDrift
	EventFieldConflict    = "FieldConflict"
	EventMultiplePods     = sandboxv1beta1.ReasonMultiplePods
)

// What the Sandbox reconciler needs, and no more: it never deletes PVCs, and
// it writes with server-side apply (patch), never update. On the Sandbox
// itself it writes only the pod-name annotation (a merge patch of that one
// key, as upstream).
//
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes/status,verbs=get;patch
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods;services,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxtemplates,verbs=get;list;watch

// SandboxReconciler makes each Sandbox's Pod, Service, PVCs and NetworkPolicy match its spec
// by observe -> plan (render.PlanSandbox) -> policy -> execute, and reports
// what it sees in status.
type SandboxReconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// Engine applies everything the reconciler writes.
	Engine *ssa.Engine
	// Recorder emits events for conditions a user must act on.
	Recorder events.EventRecorder
	// ClusterDomain is the cluster's DNS domain, for status.serviceFQDN.
	ClusterDomain string
	// Clock tells the time (shutdownTime); a fake in tests.
	Clock clock.PassiveClock
	// StatusCoalesceWindow bounds how often a Sandbox whose Ready stays
	// False gets status writes: within the window after our last write for
	// it, such a change is deferred to the end of the window (a Pod going
	// Pending -> scheduled -> Running would otherwise cost a write per step).
	// Changes into or out of Ready are written at once. Zero means 5s;
	// negative disables coalescing.
	StatusCoalesceWindow time.Duration
	// Policy holds the policies rendered objects are checked against before
	// anything is applied; nil checks nothing.
	Policy *policy.Holder
	// Defaults are what a new Pod gets where the Sandbox's pod template
	// leaves a field unset (the default runtime class); nil gives none.
	Defaults render.DefaultsSource
	// ControllerNamespace is where the sandbox router runs: a Sandbox's
	// default-deny NetworkPolicy admits ingress only from routers there.
	// Empty makes no NetworkPolicies (tests that do not run a router).
	ControllerNamespace string
	// Templates is set when the extension controllers run (their CRDs are
	// installed): the Pod of a Sandbox made from a template that is gone
	// then falls under the namespace's default-deny NetworkPolicy, and
	// templates are watched for that.
	Templates bool
	// Claims, when set (SetupExtensions sets it), says which claims wait
	// for warm members: a Sandbox a claim took waits for them too
	// (awaitClaimCommit).
	Claims *WarmQueue

	// memory holds, per Sandbox, what this process last wrote and
	// reported (sandbox_memo.go).
	memory sandboxMemory
	// backlog counts the Sandboxes whose transitional status is deferred
	// (sandbox_backlog.go).
	backlog statusBacklog

	// skeleton loads, skips, forgets and retries around reconcile.
	skeleton skeleton[*sandboxv1beta1.Sandbox]
	// woken is the controller's queue once it runs: what Claims wakes is
	// added to it (wake).
	woken atomic.Pointer[workqueue.TypedRateLimitingInterface[reconcile.Request]]
}

// SetupWithManager registers the reconciler, its watches and the pod index.
func (r *SandboxReconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.ClusterDomain == "" {
		r.ClusterDomain = "cluster.local"
	}
	if r.StatusCoalesceWindow == 0 {
		r.StatusCoalesceWindow = 5 * time.Second
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, IndexController, podControllerKey); err != nil {
		return fmt.Errorf("indexing pods by controller: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("sandbox").
		// Not the echo of our own status write (ownEcho).
		For(&sandboxv1beta1.Sandbox{}, builder.WithPredicates(r.ownEcho())).
		// What a Sandbox controls, and an unowned Pod or Service named
		// like it (it may become adoptable, or go away and free the name).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(sandboxOfChild)).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(sandboxOfChild)).
		Watches(&corev1.PersistentVolumeClaim{}, enqueueController(sandboxv1beta1.SandboxKind)).
		Watches(&networkingv1.NetworkPolicy{}, enqueueController(sandboxv1beta1.SandboxKind)).
		// The namespace's default-deny NetworkPolicy, owned by the
		// Namespace: made by a Sandbox's plan, restored when changed or
		// deleted.
		Watches(&networkingv1.NetworkPolicy{}, handler.EnqueueRequestsFromMapFunc(r.namespacePolicyToSandboxes),
			builder.WithPredicates(isNamespacePolicy))
	if r.Templates {
		b = b.Watches(&extv1beta1.SandboxTemplate{}, handler.EnqueueRequestsFromMapFunc(r.templateToSandboxes)).
			// A template's NetworkPolicy: the new Pods that wait for it
			// start once it is there.
			Watches(&networkingv1.NetworkPolicy{}, handler.EnqueueRequestsFromMapFunc(r.templatePolicyToSandboxes),
				builder.WithPredicates(isTemplatePolicy))
	}
	// The warm queue wakes a Sandbox whose claim's commit, or burst, it
	// waited for (awaitClaimCommit).
	b = b.WatchesRawSource(r.wakeSource())
	b = watchModeLabels(b, mgr.GetClient(), r.Policy, func() client.ObjectList { return &sandboxv1beta1.SandboxList{} })
	// A Sandbox waiting for a Pod may get one under a new default runtime class.
	return watchRuntimeClasses(b, r.Defaults, r.awaitingPod).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// Reconcile brings one Sandbox closer to its spec. A Sandbox being deleted
// is left to garbage collection, which removes what it owns.
func (r *SandboxReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return r.skeleton.run(ctx, req, objectKind[*sandboxv1beta1.Sandbox]{
		controller: "sandbox", reader: r.Client, deletion: forgetDeleting,
		object: func() *sandboxv1beta1.Sandbox { return &sandboxv1beta1.Sandbox{} },
		forget: r.forget, body: r.reconcile, engine: r.Engine, kind: "Sandbox",
	})
}

func (r *SandboxReconciler) reconcile(ctx context.Context, sb *sandboxv1beta1.Sandbox) (reconcile.Result, error) {
	if wait := r.awaitClaimCommit(ctx, sb, r.Clock.Now()); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	now := r.Clock.Now()
	expired := sb.Spec.ShutdownTime != nil && !now.Before(sb.Spec.ShutdownTime.Time)
	obs, err := r.observe(ctx, sb, render.WantsPod(sb, expired))
	if err != nil {
		return reconcile.Result{}, err
	}
	r.podNameShown(sb)
	reported := r.reportedStatus(sb)
	in := render.SandboxPlanInputs{
		Sandbox: sb, Pods: obs.pods, Pod: obs.pod, Adopt: obs.adopt, PodOwned: obs.podOwned, ForeignPod: obs.foreignPod,
		Service: obs.service, ForeignService: obs.foreignSvc, PVCs: obs.pvcs,
		NetworkPolicy: obs.netpol, NamespacePolicy: obs.nsPolicy, NamespaceUID: obs.nsUID,
		ControllerNamespace: r.ControllerNamespace, TemplateGone: obs.templateGone, TemplatePolicy: obs.templatePolicy,
		Expired:  expired,
		Defaults: render.CurrentDefaults(r.Defaults), ClusterDomain: r.ClusterDomain,
		Now: metav1.NewTime(now.Truncate(time.Second)), Previous: reported.Conditions, Reported: reported,
	}
	began := time.Now()
	plan, err := render.PlanSandbox(in)
	metrics.RenderSeconds.WithLabelValues("Sandbox").Observe(time.Since(began).Seconds())
	if err != nil {
		return reconcile.Result{}, err
	}
	return r.run(ctx, in, plan, now)
}
