package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/metrics"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/render"
)

// Event reasons of idle suspend.
const (
	// EventIdleSuspended is the Normal event on a Sandbox suspended for
	// having had no traffic for its idle timeout.
	EventIdleSuspended = "IdleSuspended"
	// EventInvalidResumeAnnotation is the Warning event, once per value, on
	// a Sandbox whose resume annotations do not parse (the webhook refuses
	// them; this one got past it). It is not suspended.
	EventInvalidResumeAnnotation = "InvalidResumeAnnotation"
)

// Idle suspend reads Sandboxes from the cache and writes their
// spec.operatingMode with server-side apply (patch).
//
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// IdleReconciler suspends the Sandboxes that ask for it with the
// agents.x-k8s.io/idle-timeout annotation once that long has passed
// without traffic (render.IdleDeadline decides). The suspend is a
// server-side apply of spec.operatingMode alone, under the field manager
// sandboxv1beta1.FieldManagerOperatingMode (the router and the SDK resume
// under the same one), forced, and guarded by the Sandbox's UID and
// resourceVersion: a Sandbox that changed since the cache showed it (fresh
// activity above all) is not suspended, but looked at again. The
// SandboxReconciler then deletes the Pod and keeps everything else.
// Sandboxes without the annotation are never looked at, and one waiting to
// become idle costs no request: it is looked at again when it changes or
// when its deadline comes.
type IdleReconciler struct {
	// Client reads from the manager's cache.
	Client client.Client
	// Engine writes the suspend; its field manager must be
	// sandboxv1beta1.FieldManagerOperatingMode (nil: one over Client).
	// Nothing else is ever applied with it: an apply that left out
	// spec.operatingMode would give the field up.
	Engine   *ssa.Engine
	Recorder events.EventRecorder
	// Clock tells the time; a fake in tests.
	Clock clock.PassiveClock

	// warned remembers, per Sandbox (by UID), the invalid annotation it
	// was last warned about (the error), so each is reported once.
	warned objectMemo[string]

	// skeleton loads, skips, forgets and retries around reconcile.
	skeleton skeleton[*sandboxv1beta1.Sandbox]
}

// SetupWithManager registers the reconciler, watching only Sandboxes that
// carry the idle-timeout annotation.
func (r *IdleReconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Engine == nil {
		r.Engine = ssa.New(r.Client, sandboxv1beta1.FieldManagerOperatingMode, "")
	}
	if m := r.Engine.FieldManager(); m != sandboxv1beta1.FieldManagerOperatingMode {
		return fmt.Errorf("idle suspend: the engine's field manager is %q, want %q", m, sandboxv1beta1.FieldManagerOperatingMode)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("sandbox-idle").
		For(&sandboxv1beta1.Sandbox{}, builder.WithPredicates(hasIdleTimeout)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// hasIdleTimeout passes events of Sandboxes that carry the idle-timeout
// annotation (for updates: after the update).
var hasIdleTimeout = predicate.NewPredicateFuncs(func(o client.Object) bool {
	_, ok := o.GetAnnotations()[sandboxv1beta1.AnnotationIdleTimeout]
	return ok
})

// Reconcile suspends one Sandbox if it has been idle long enough, or
// comes back when it may have been. A Sandbox being deleted is looked at
// all the same; one in a namespace being deleted is not suspended.
func (r *IdleReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return r.skeleton.run(ctx, req, objectKind[*sandboxv1beta1.Sandbox]{
		controller: "sandbox-idle", reader: r.Client, deletion: runDeleting,
		object: func() *sandboxv1beta1.Sandbox { return &sandboxv1beta1.Sandbox{} },
		forget: r.forget, body: r.reconcile, engine: r.Engine, kind: "Sandbox",
	})
}

func (r *IdleReconciler) forget(key types.NamespacedName, _ *sandboxv1beta1.Sandbox) {
	r.warned.Forget(key)
}

func (r *IdleReconciler) reconcile(ctx context.Context, sb *sandboxv1beta1.Sandbox) (reconcile.Result, error) {
	d, err := render.IdleDeadline(sb, r.Clock.Now())
	if err != nil {
		// Terminal until the annotation changes (watched): say so once.
		r.warnInvalid(sb, err)
		return reconcile.Result{}, reconcile.TerminalError(err)
	}
	r.warned.Forget(client.ObjectKeyFromObject(sb))
	if !d.Suspend {
		return reconcile.Result{RequeueAfter: d.After}, nil
	}
	if namespaceDeleting(ctx, r.Client, sb.Namespace) {
		return reconcile.Result{}, nil
	}
	if err := r.suspend(ctx, sb); err != nil {
		// A Conflict (the Sandbox changed since the cache showed it) is
		// retried quietly, and decided again from a fresh view.
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	metrics.IdleSuspends.Inc()
	timeout := sb.Annotations[sandboxv1beta1.AnnotationIdleTimeout]
	log.FromContext(ctx).V(1).Info("suspended an idle Sandbox", "idleTimeout", timeout, "idleSince", d.Since)
	r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, EventIdleSuspended, "Suspend",
		"suspended after %s without traffic; the next request through the router or the SDK resumes it", timeout)
	return reconcile.Result{}, nil
}

// suspend sets spec.operatingMode to Suspended, and nothing else, if the
// Sandbox is still exactly the one decided on.
func (r *IdleReconciler) suspend(ctx context.Context, sb *sandboxv1beta1.Sandbox) error {
	desired := sandboxac.Sandbox(sb.Name, sb.Namespace).
		WithUID(sb.UID).
		WithResourceVersion(sb.ResourceVersion).
		WithSpec(sandboxac.SandboxSpec().WithOperatingMode(sandboxv1beta1.SandboxOperatingModeSuspended))
	_, err := ssa.Apply(ctx, r.Engine, "Sandbox", desired, sb, sandboxac.ExtractSandbox, ssa.Options{Force: true})
	return err
}

// warnInvalid emits one Warning event per Sandbox and invalid value.
func (r *IdleReconciler) warnInvalid(sb *sandboxv1beta1.Sandbox, err error) {
	k := client.ObjectKeyFromObject(sb)
	if last, ok := r.warned.Recall(k, sb.UID); ok && last == err.Error() {
		return
	}
	r.warned.Remember(k, sb.UID, err.Error())
	r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, EventInvalidResumeAnnotation, "Check",
		"%v; the Sandbox is not suspended when idle until the annotation is fixed", err)
}
