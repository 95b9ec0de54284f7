package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/metrics"
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

// memo is what the reconciler last wrote for one Sandbox. Under load the
// cache lags behind our own writes; deriving status from a stale copy would
// stamp new transition times on conditions we already reported and write
// them again. While the memo is for the same object (UID), status is derived
// from and compared with the memo instead. Only this controller writes a
// Sandbox's status, so the memo is the truth about it; it is dropped when the
// Sandbox goes away, and a restarted controller starts from the cache.
type memo struct {
	uid types.UID
	// at is the time of our last write for the Sandbox or its children.
	at time.Time
	// status is the fingerprint of the status we last applied, empty if none.
	status string
	// reported is that status: its conditions, service and selector.
	reported *sandboxv1beta1.SandboxStatus
	// drift is the Pod template drift last reported in an event.
	drift string
	// podName is the pod-name annotation value last patched ("" removed),
	// at podNameAt: for a while, a cache that has not caught up with the
	// patch does not cause it again.
	podName   string
	podNameAt time.Time
}

// forget drops what this process remembers about a Sandbox that is gone.
func (r *SandboxReconciler) forget(key types.NamespacedName) {
	r.memory.Delete(key)
	for _, kind := range []string{"Pod", "Service", "SandboxStatus"} {
		r.Engine.Forget(kind, key.Namespace, key.Name)
	}
}

// reported returns the conditions last reported for sb: our memo when we
// have one, else what the cache holds.
func (r *SandboxReconciler) reported(sb *sandboxv1beta1.Sandbox) []metav1.Condition {
	return r.reportedStatus(sb).Conditions
}

// reportedStatus returns the status last reported for sb: our memo when we
// have one, else what the cache holds.
func (r *SandboxReconciler) reportedStatus(sb *sandboxv1beta1.Sandbox) *sandboxv1beta1.SandboxStatus {
	if m := r.recall(sb); m != nil && m.status != "" {
		return m.reported
	}
	return &sb.Status
}

func (r *SandboxReconciler) recall(sb *sandboxv1beta1.Sandbox) *memo {
	v, ok := r.memory.Load(client.ObjectKeyFromObject(sb))
	if !ok {
		return nil
	}
	m := v.(*memo)
	if m.uid != sb.UID {
		return nil
	}
	return m
}

// remember records a write for sb at a time; status, when not empty, is the
// fingerprint of the status written, reported that status.
func (r *SandboxReconciler) remember(sb *sandboxv1beta1.Sandbox, at time.Time, status string, reported *sandboxv1beta1.SandboxStatus) {
	m := &memo{uid: sb.UID, at: at}
	if prev := r.recall(sb); prev != nil {
		m.status, m.reported, m.drift = prev.status, prev.reported, prev.drift
		m.podName, m.podNameAt = prev.podName, prev.podNameAt
	}
	if status != "" {
		m.status, m.reported = status, reported
	}
	r.memory.Store(client.ObjectKeyFromObject(sb), m)
}

// driftReported records the Pod template drift last reported for sb and
// says whether it is new (an event is due).
func (r *SandboxReconciler) driftReported(sb *sandboxv1beta1.Sandbox, drift string) bool {
	m := r.recall(sb)
	if m == nil {
		m = &memo{uid: sb.UID}
	}
	if m.drift == drift {
		return false
	}
	next := *m
	next.drift = drift
	r.memory.Store(client.ObjectKeyFromObject(sb), &next)
	return drift != ""
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

// observed is what a reconcile reads from the cache.
type observed struct {
	pods       []*corev1.Pod   // Pods this Sandbox controls
	pod        *corev1.Pod     // the Pod to keep: owned, or about to be adopted
	adopt      bool            // pod is unowned and may be adopted
	foreignPod *corev1.Pod     // a Pod with our pod name that we may not take
	foreignSvc *corev1.Service // a Service with our name that we may not take
	service    *corev1.Service // our Service
	pvcs       map[string]*corev1.PersistentVolumeClaim
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

// deferStatus says how long to wait before writing desired, or zero to write
// now. A status that reaches a resting state (Ready, suspended, finished,
// expired, failed) is written at once. A transitional one (a Pod pending,
// being scheduled or being deleted) is held until StatusCoalesceWindow after
// our last write for the Sandbox, and the deferred reconcile writes whatever
// is true by then. A Pod that becomes Ready within the window thus costs one
// status write instead of three, and so does a suspend.
func (r *SandboxReconciler) deferStatus(sb *sandboxv1beta1.Sandbox, desired *sandboxac.SandboxApplyConfiguration, now time.Time) time.Duration {
	if r.StatusCoalesceWindow < 0 || !transitional(desired) {
		return 0
	}
	m := r.recall(sb)
	if m == nil {
		return 0
	}
	if wait := m.at.Add(r.StatusCoalesceWindow).Sub(now); wait > 0 {
		return wait
	}
	return 0
}

// transitional reports a status on the way to a resting state: not Ready
// only because the Pod is still starting, or suspended with the Pod still
// terminating.
func transitional(desired *sandboxac.SandboxApplyConfiguration) bool {
	var ready, suspended *metav1ac.ConditionApplyConfiguration
	for i := range desired.Status.Conditions {
		switch c := &desired.Status.Conditions[i]; *c.Type {
		case sandboxv1beta1.ConditionReady:
			ready = c
		case sandboxv1beta1.ConditionSuspended:
			suspended = c
		case sandboxv1beta1.ConditionFinished:
			return false
		}
	}
	if ready == nil || *ready.Status == metav1.ConditionTrue {
		return false
	}
	switch *ready.Reason {
	case sandboxv1beta1.ReasonDependenciesNotReady:
		return true
	case sandboxv1beta1.ReasonSandboxSuspended:
		return suspended != nil && *suspended.Status != metav1.ConditionTrue
	}
	return false
}

func (r *SandboxReconciler) observe(ctx context.Context, sb *sandboxv1beta1.Sandbox) (*observed, error) {
	obs := &observed{pvcs: map[string]*corev1.PersistentVolumeClaim{}}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(sb.Namespace), client.MatchingFields{IndexControllerUID: string(sb.UID)}); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	for i := range pods.Items {
		obs.pods = append(obs.pods, &pods.Items[i])
	}
	if len(obs.pods) == 1 {
		obs.pod = obs.pods[0]
	}
	if len(obs.pods) == 0 {
		// The tracked name (pod-name annotation), then the Sandbox's own
		// name, which a new Pod would take.
		names := []string{render.PodName(sb)}
		if names[0] != sb.Name {
			names = append(names, sb.Name)
		}
		for _, name := range names {
			p := &corev1.Pod{}
			err := r.Client.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: name}, p)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("reading pod: %w", err)
			}
			if adoptable(p, sb) {
				obs.pod, obs.adopt = p, true
			} else {
				obs.foreignPod = p
			}
			break
		}
	}

	svc := &corev1.Service{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}, svc)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("reading service: %w", err)
	case ownedBy(svc, sb) || adoptable(svc, sb):
		obs.service = svc
	default:
		obs.foreignSvc = svc
	}

	for _, t := range sb.Spec.VolumeClaimTemplates {
		name := render.PVCName(t.Name, sb.Name)
		pvc := &corev1.PersistentVolumeClaim{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: name}, pvc)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading pvc: %w", err)
		default:
			obs.pvcs[name] = pvc
		}
	}
	return obs, nil
}

// applyChildren renders the Sandbox and applies the difference. It returns
// what changed and, for a running Pod that no longer matches the template, a
// description of the drift.
func (r *SandboxReconciler) applyChildren(ctx context.Context, sb *sandboxv1beta1.Sandbox, obs *observed, expired bool) (ssa.ChangeSet, string, error) {
	// A new Pod is named after the Sandbox, as upstream: the pod-name
	// annotation only tracks an existing (adopted) Pod.
	podName := sb.Name
	if obs.pod != nil {
		podName = obs.pod.Name
	}
	began := time.Now()
	desired, err := render.Sandbox(render.SandboxInputs{
		Sandbox: sb, ServiceExists: obs.service != nil && ownedBy(obs.service, sb), PodName: podName, Expired: expired,
		Defaults: r.podDefaults(obs.pod),
	})
	metrics.RenderSeconds.WithLabelValues("Sandbox").Observe(time.Since(began).Seconds())
	if err != nil {
		// The spec cannot be rendered: retrying will not help until it changes.
		return nil, "", &terminalError{err.Error()}
	}
	if set := r.Policy.Get(); set != nil {
		c := creating{pod: obs.pod == nil && obs.foreignPod == nil, service: obs.service == nil, pvcs: map[string]bool{}}
		if obs.adopt && desired.Pod != nil {
			// The Pod was admitted as someone else's: a Sandbox takes it
			// over only if it would have been allowed to create it.
			c.adopt = obs.pod
		}
		for _, want := range desired.PVCs {
			if obs.pvcs[*want.Name] == nil {
				c.pvcs[*want.Name] = true
			}
		}
		began := time.Now()
		inNS, _ := r.Policy.In(ctx, sb.Namespace)
		ds, err := checkSandbox(inNS, set, sb, desired, c)
		metrics.PolicySeconds.WithLabelValues("Sandbox").Observe(time.Since(began).Seconds())
		if err != nil {
			return nil, "", err
		}
		if warned := policy.Warned(ds); len(warned) > 0 && r.Recorder != nil {
			// The namespace's mode lets it through with a warning (the
			// webhook showed the same at kubectl apply time).
			r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, EventPolicyWarning, "Check", "%s", policy.Summary(warned))
		}
	}
	var changes ssa.ChangeSet
	record := func(c ssa.Change, err error) error {
		changes = append(changes, c)
		return err
	}

	for _, want := range desired.PVCs {
		live := obs.pvcs[*want.Name]
		if live != nil && !ownedBy(live, sb) && !adoptable(live, sb) {
			return changes, "", &terminalError{notTaken("PVC", live, sb)}
		}
		adopt := live != nil && !ownedBy(live, sb)
		if err := record(ssa.Apply(ctx, r.Engine, "PersistentVolumeClaim", want, live, corev1ac.ExtractPersistentVolumeClaim, ssa.Options{Force: adopt})); err != nil {
			return changes, "", err
		}
	}

	switch {
	case desired.Service != nil && obs.foreignSvc != nil:
		return changes, "", &terminalError{notTaken("service", obs.foreignSvc, sb)}
	case desired.Service != nil && obs.service != nil && !ownedBy(obs.service, sb) &&
		obs.service.Spec.ClusterIP != corev1.ClusterIPNone && obs.service.Spec.ClusterIP != "":
		return changes, "", &terminalError{fmt.Sprintf("cannot adopt service %q: ClusterIP is %q (expected %q, field is immutable)",
			obs.service.Name, obs.service.Spec.ClusterIP, corev1.ClusterIPNone)}
	case desired.Service != nil:
		var svc *corev1.Service
		adopt := false
		if obs.service != nil {
			svc, adopt = obs.service, !ownedBy(obs.service, sb)
		}
		if err := record(ssa.Apply(ctx, r.Engine, "Service", desired.Service, svc, corev1ac.ExtractService, ssa.Options{Force: adopt})); err != nil {
			return changes, "", err
		}
	case desired.DeleteService && obs.service != nil && ownedBy(obs.service, sb):
		if err := record(r.Engine.Delete(ctx, "Service", obs.service)); err != nil {
			return changes, "", err
		}
	}

	drift := ""
	switch {
	case desired.Pod == nil && obs.pod != nil && !obs.adopt:
		if err := record(r.Engine.Delete(ctx, "Pod", obs.pod)); err != nil {
			return changes, "", err
		}
	case desired.Pod != nil && obs.foreignPod != nil:
		// Reported in status; creating would fail on the name.
	case desired.Pod != nil && obs.pod != nil:
		// Pods are mostly immutable: keep the spec we applied at creation and
		// update only metadata. A template change waits for the next Pod.
		owned, err := corev1ac.ExtractPod(obs.pod, r.Engine.FieldManager())
		if err != nil {
			return changes, "", fmt.Errorf("extracting pod fields: %w", err)
		}
		if owned.Spec != nil && !apiequality.Semantic.DeepEqual(owned.Spec, desired.Pod.Spec) {
			drift = "spec.podTemplate.spec changed after the Pod was created; the running Pod keeps its spec and the change takes effect when the Pod is next created (suspend and resume the Sandbox to apply it now)"
		}
		desired.Pod.Spec = owned.Spec
		if err := record(ssa.Apply(ctx, r.Engine, "Pod", desired.Pod, obs.pod, corev1ac.ExtractPod, ssa.Options{Force: obs.adopt})); err != nil {
			return changes, "", err
		}
		if obs.adopt {
			r.Recorder.Eventf(sb, obs.pod, corev1.EventTypeNormal, sandboxv1beta1.EventSandboxAdopted, "Adopt", "adopted Pod %s", obs.pod.Name)
		}
	case desired.Pod != nil:
		if err := record(ssa.Apply(ctx, r.Engine, "Pod", desired.Pod, (*corev1.Pod)(nil), corev1ac.ExtractPod, ssa.Options{})); err != nil {
			return changes, "", err
		}
	}
	return changes, drift, nil
}

// trackPodName keeps the agents.x-k8s.io/pod-name annotation as upstream
// writes it: the name of the Pod the Sandbox created or adopted; removed
// while suspended, and when the name is held by a Pod another controller
// owns. It runs after the children were applied without error.
func (r *SandboxReconciler) trackPodName(ctx context.Context, sb *sandboxv1beta1.Sandbox, obs *observed) error {
	want := ""
	switch {
	case sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended:
	case obs.foreignPod != nil && metav1.GetControllerOf(obs.foreignPod) == nil:
		return nil // upstream leaves it while an unowned Pod is in the way
	case obs.foreignPod != nil:
	case obs.pod != nil:
		want = obs.pod.Name
	default:
		want = sb.Name // the Pod just created
	}
	have, ok := sb.Annotations[sandboxv1beta1.AnnotationPodName]
	if (want == "" && !ok) || (want != "" && have == want) {
		return nil
	}
	m := r.recall(sb)
	now := r.Clock.Now()
	if m != nil && m.podName == want && now.Sub(m.podNameAt) < ssa.CreateExpectation {
		return nil // patched moments ago; the cache has not shown it yet
	}
	var value any
	if want != "" {
		value = want
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{sandboxv1beta1.AnnotationPodName: value}}})
	if err != nil {
		return err
	}
	if _, err := r.Engine.Patch(ctx, "Sandbox", sb, client.RawPatch(types.MergePatchType, body), r.Engine.FieldManager()); err != nil {
		return client.IgnoreNotFound(err)
	}
	next := memo{uid: sb.UID}
	if m != nil {
		next = *m
	}
	next.podName, next.podNameAt = want, now
	r.memory.Store(client.ObjectKeyFromObject(sb), &next)
	return nil
}

func (r *SandboxReconciler) applyStatus(ctx context.Context, sb *sandboxv1beta1.Sandbox, in render.SandboxStatusInputs) error {
	return r.writeStatus(ctx, sb, render.SandboxStatus(in))
}

func (r *SandboxReconciler) writeStatus(ctx context.Context, sb *sandboxv1beta1.Sandbox, desired *sandboxac.SandboxApplyConfiguration) error {
	fp := ssa.Fingerprint(desired)
	if m := r.recall(sb); m != nil && m.status == fp {
		// Already written by us; the cache has not caught up yet.
		r.Engine.Saved("SandboxStatus", sb.Namespace, sb.Name)
		return nil
	}
	reported := &sandboxv1beta1.SandboxStatus{Conditions: conditionsOf(desired.Status.Conditions)}
	if s := desired.Status; s != nil {
		reported.Service, reported.ServiceFQDN, reported.LabelSelector = deref(s.Service), deref(s.ServiceFQDN), deref(s.LabelSelector)
	}
	firstReady := r.becomesReadyFirstTime(sb, reported.Conditions)
	change, err := ssa.ApplyStatus(ctx, r.Engine, "Sandbox", desired, sb, sandboxac.ExtractSandboxStatus)
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile: its status is moot, and its deletion brings a new event
	}
	if err != nil {
		return err
	}
	if change.Action != ssa.Unchanged {
		now := r.Clock.Now()
		r.remember(sb, now, fp, reported)
		if firstReady {
			metrics.ObserveReady(sb, now)
		}
	}
	return nil
}

// becomesReadyFirstTime reports a status that makes a new Sandbox Ready for
// the first time: nothing reported Ready before, and the spec never changed
// (generation 1), so a resume is not mistaken for a creation.
func (r *SandboxReconciler) becomesReadyFirstTime(sb *sandboxv1beta1.Sandbox, next []metav1.Condition) bool {
	if sb.Generation != 1 {
		return false
	}
	if c := findCondition(r.reported(sb), sandboxv1beta1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
		return false
	}
	c := findCondition(next, sandboxv1beta1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue
}

// notTaken is upstream's error for a child object in the way: owned by
// another controller, or unowned without a label that allows adoption.
func notTaken(kind string, o client.Object, sb *sandboxv1beta1.Sandbox) string {
	if ref := metav1.GetControllerOf(o); ref != nil {
		return fmt.Sprintf("%s %q is owned by %s/%s (UID: %s), not by sandbox %q", kind, o.GetName(), ref.Kind, ref.Name, ref.UID, sb.Name)
	}
	return fmt.Sprintf("cannot adopt unowned %s %q: missing required pool authorization label (%q) or sandbox tracking label (%q)",
		kind, o.GetName(), sandboxv1beta1.LabelAdoptable, sandboxv1beta1.LabelSandboxNameHash)
}

// terminalError is a problem only a user can fix (an invalid spec, an
// object in the way): reported in status, not retried.
type terminalError struct{ msg string }

func (e *terminalError) Error() string { return e.msg }

// adoptable reports whether an object without a controller may be taken over
// by sb: it is labeled adoptable, or carries sb's name-hash label.
func adoptable(o client.Object, sb *sandboxv1beta1.Sandbox) bool {
	if metav1.GetControllerOf(o) != nil {
		return false
	}
	l := o.GetLabels()
	return l[sandboxv1beta1.LabelAdoptable] == sandboxv1beta1.AdoptableValue ||
		l[sandboxv1beta1.LabelSandboxNameHash] == render.NameHash(sb.Name)
}

func ownedBy(o client.Object, sb *sandboxv1beta1.Sandbox) bool { return controlledBy(o, sb.UID) }

func readyReason(sb *sandboxv1beta1.Sandbox) string {
	if c := statusCondition(sb, sandboxv1beta1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

func statusCondition(sb *sandboxv1beta1.Sandbox, t string) *metav1.Condition {
	return findCondition(sb.Status.Conditions, t)
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
