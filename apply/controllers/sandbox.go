package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// Event reasons we add for conditions users must act on.
const (
	EventPodTemplateDrift = "PodTemplateDrift"
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

// SandboxReconciler makes each Sandbox's Pod, Service and PVCs match its spec
// by render -> diff -> apply, and reports what it sees in status.
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

	// memory holds, per Sandbox, what this process last wrote (see memo).
	memory sync.Map // types.NamespacedName -> *memo

	// retries backs off expected, passing failures without logging them.
	retries retries
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
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, IndexControllerUID, controllerUID); err != nil {
		return fmt.Errorf("indexing pods by controller: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("sandbox").
		For(&sandboxv1beta1.Sandbox{}).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.PersistentVolumeClaim{}).
		// An unowned Pod or Service named like a Sandbox may become
		// adoptable, or go away and free the name: let that Sandbox look again.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(unownedToSandbox)).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(unownedToSandbox))
	b = watchModeLabels(b, mgr.GetClient(), r.Policy, func() client.ObjectList { return &sandboxv1beta1.SandboxList{} })
	// A Sandbox waiting for a Pod may get one under a new default runtime class.
	return watchRuntimeClasses(b, r.Defaults, r.awaitingPod).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

func unownedToSandbox(_ context.Context, o client.Object) []reconcile.Request {
	if metav1.GetControllerOf(o) != nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
}

// Reconcile brings one Sandbox closer to its spec.
func (r *SandboxReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	result, err := r.reconcile(ctx, req)
	return r.retries.quiet(ctx, "sandbox", req, result, err)
}

func (r *SandboxReconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	sb := &sandboxv1beta1.Sandbox{}
	if err := r.Client.Get(ctx, req.NamespacedName, sb); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if sb.DeletionTimestamp != nil || namespaceDeleting(ctx, r.Client, sb.Namespace) {
		// Garbage collection (or the namespace's deletion) removes what
		// the Sandbox owns.
		r.forget(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	obs, err := r.observe(ctx, sb)
	if err != nil {
		return reconcile.Result{}, err
	}
	now := r.Clock.Now()
	expired := sb.Spec.ShutdownTime != nil && !now.Before(sb.Spec.ShutdownTime.Time)

	wantService := sb.Spec.Service != nil && *sb.Spec.Service
	reported := r.reportedStatus(sb)
	statusIn := render.SandboxStatusInputs{
		Sandbox: sb, Pod: obs.pod, ForeignPod: obs.foreignPod, Pods: len(obs.pods),
		// An unowned Service is taken only when spec.service asks for one.
		Service: obs.service != nil && (ownedBy(obs.service, sb) || wantService),
		Expired: expired, ClusterDomain: r.ClusterDomain, Now: metav1.NewTime(now.Truncate(time.Second)),
		Previous: reported.Conditions, Reported: reported,
	}
	if obs.adopt {
		// Not ours until the apply below takes it over; while suspended it
		// is not taken at all.
		statusIn.Pod = nil
		if sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended {
			statusIn.ForeignPod = obs.pod
		}
	}

	if len(obs.pods) > 1 {
		// Fail closed: two Pods behind one identity is exactly what a Sandbox
		// must never have, and we cannot tell which one is right.
		if readyReason(sb) != sandboxv1beta1.ReasonMultiplePods {
			r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, EventMultiplePods, "Reconciling", "%s", render.MultiplePodsMessage(len(obs.pods)))
		}
		return reconcile.Result{}, r.applyStatus(ctx, sb, statusIn)
	}

	changes, drift, err := r.applyChildren(ctx, sb, obs, expired)
	if err != nil {
		// Nothing (or not everything) was applied: an unowned Service was
		// not taken.
		statusIn.Service = obs.service != nil && ownedBy(obs.service, sb)
	}
	var denied *policyError
	if errors.As(err, &denied) {
		// Nothing was applied. Only a change to the Sandbox or to the
		// policies (which re-checks everything) can fix this.
		if readyReason(sb) != sandboxv1beta1.ReasonPolicyDenied {
			r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, EventPolicyDenied, "Check", "%s", denied.Error())
		}
		statusIn.PolicyDenied = denied.Error()
		return reconcile.Result{}, r.applyStatus(ctx, sb, statusIn)
	}
	if err != nil {
		var terminal *terminalError
		var conflict *ssa.ConflictError
		if errors.As(err, &terminal) || errors.As(err, &conflict) || apierrors.IsInvalid(err) {
			// Only a change to the Sandbox, to the object in the way or to
			// another manager's fields (all watched) can fix this: the same
			// request would be refused again. Report it; do not fight over
			// fields and do not retry with backoff.
			if conflict != nil && readyReason(sb) != sandboxv1beta1.ReasonReconcilerError {
				r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, EventFieldConflict, "Apply", "%s", conflict.Error())
			}
			statusIn.Error = err.Error()
			return reconcile.Result{}, r.applyStatus(ctx, sb, statusIn)
		}
		if namespaceTerminating(err) {
			// Everything here is about to go: nothing to report.
			return reconcile.Result{}, err
		}
		statusIn.Error = err.Error()
		if serr := r.applyStatus(ctx, sb, statusIn); serr != nil {
			log.FromContext(ctx).V(1).Info("status not updated", "error", serr)
		}
		return reconcile.Result{}, err
	}
	if expired && sb.Spec.ShutdownPolicy != nil && *sb.Spec.ShutdownPolicy == sandboxv1beta1.ShutdownPolicyDelete {
		_, err := r.Engine.Delete(ctx, "Sandbox", sb, client.PropagationPolicy(metav1.DeletePropagationBackground))
		return reconcile.Result{}, err
	}
	if !expired {
		if err := r.trackPodName(ctx, sb, obs); err != nil {
			return reconcile.Result{}, err
		}
	}
	// Drift is reported by an event only: upstream's status has no place
	// for it, and clients compare the whole status.
	if r.driftReported(sb, drift) {
		r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, EventPodTemplateDrift, "Reconcile", "%s", drift)
	}

	var result reconcile.Result
	if sb.Spec.ShutdownTime != nil && !expired {
		result.RequeueAfter = sb.Spec.ShutdownTime.Sub(now)
	}
	if changes.Pending() && (result.RequeueAfter == 0 || result.RequeueAfter > ssa.CreateExpectation) {
		// Something we created is not in the cache yet: if it never shows
		// up (deleted at once), look again when the expectation expires.
		result.RequeueAfter = ssa.CreateExpectation
	}
	if changes.Changed() {
		// Every object we just changed is watched; its event brings us back
		// with fresh observations, and status is written then. This saves a
		// status write per change.
		r.remember(sb, now, "", nil)
		log.FromContext(ctx).V(1).Info("applied", "changes", changes.String())
		return result, nil
	}
	desired := render.SandboxStatus(statusIn)
	if wait := r.deferStatus(sb, desired, now); wait > 0 {
		if result.RequeueAfter == 0 || wait < result.RequeueAfter {
			result.RequeueAfter = wait
		}
		return result, nil
	}
	return result, r.writeStatus(ctx, sb, desired)
}
