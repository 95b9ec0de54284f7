package controllers

import (
	"context"
	"fmt"
	"sort"
	"time"

	"go.opentelemetry.io/otel/trace"
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

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxclaims,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxclaims/status,verbs=get;patch
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxclaims/finalizers,verbs=update
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxtemplates,verbs=get;list;watch

// bindingHold is how long a binding this process made is trusted over a
// cache that does not show it yet.
const bindingHold = 30 * time.Second

// ClaimReconciler binds each SandboxClaim to exactly one Sandbox, taken warm
// from its pool or created cold from the pool's template, and reports the
// Sandbox's state on the claim.
type ClaimReconciler struct {
	Client client.Client
	// APIReader reads past the cache, to look at a member again after an
	// adoption lost a race.
	APIReader client.Reader
	Engine    *ssa.Engine
	Recorder  events.EventRecorder
	// Queue offers each pool's Ready members.
	Queue *WarmQueue
	// Defaults are what a cold-started Sandbox's Pod gets where the
	// template leaves a field unset; it is checked with them.
	Defaults render.DefaultsSource
	// Policy holds the policies a cold-started Sandbox is checked against.
	Policy *policy.Holder
	Clock  clock.PassiveClock
	// Tracer, if set, traces each reconcile as a span that continues the
	// claim's trace-context annotation (API calls made under it are child
	// spans when the client's transport is tracing.Transport), and the
	// Sandbox it cold-starts carries the span's context. Nil: off.
	Tracer trace.TracerProvider

	// memory holds, per claim, what this process knows of it beyond the
	// cache.
	memory claimMemory

	// skeleton loads, skips, forgets and retries around reconcile.
	skeleton skeleton[*extv1beta1.SandboxClaim]
}

// claimMemory is what the claim reconciler remembers of each claim (by
// UID), dropped when the claim goes (forget).
type claimMemory struct {
	// status is the status last written, its conditions as reported
	// (claimStatus).
	status statusMemo[[]metav1.Condition]
	// binding is what this process knows of the claim's binding.
	binding objectMemo[*binding]
	// annotations is the digest of the annotations last written on the
	// claim, and when (writeAnnotations).
	annotations objectMemo[sent]
}

// binding is what this process knows about a claim beyond the cache. It is
// changed in place: one reconcile of a claim runs at a time.
type binding struct {
	// seen is when this process first saw the claim.
	seen time.Time
	// name of the bound Sandbox, empty until one is bound.
	name string
	// sandbox is the Sandbox as the API server returned it when bound.
	sandbox *sandboxv1beta1.Sandbox
	// at is when the binding was made.
	at time.Time
	// launchType is how the Sandbox was bound (warm or cold).
	launchType string
	// readyReported is set once the claim was reported Ready.
	readyReported bool
	// readyAt is when this process first reported the claim Ready, zero
	// if it has not.
	readyAt time.Time
	// expired is set once this process expired the claim: final, even
	// while the cache does not show the expired status yet.
	expired bool
	// uncertain is a warm member this process sent the take of without
	// learning the outcome (the answer was lost: the API server went away
	// mid-request). The take may have been made, so until the member is
	// read again the claim takes nothing else (resolveUncertain).
	uncertain *sandboxv1beta1.Sandbox
}

// SetupWithManager registers the reconciler and its watches.
func (r *ClaimReconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("sandboxclaim").
		For(&extv1beta1.SandboxClaim{}).
		Owns(&sandboxv1beta1.Sandbox{}).
		// A claim waiting for its pool or template, or refused by the
		// template's policies, looks again when they change, and when the
		// default runtime class does.
		Watches(&extv1beta1.SandboxWarmPool{}, handler.EnqueueRequestsFromMapFunc(r.claimsOfPool)).
		Watches(&extv1beta1.SandboxTemplate{}, handler.EnqueueRequestsFromMapFunc(r.claimsOfTemplate))
	b = watchModeLabels(b, mgr.GetClient(), r.Policy, func() client.ObjectList { return &extv1beta1.SandboxClaimList{} })
	return watchRuntimeClasses(b, r.Defaults, r.deniedClaims).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// claimsOfPool maps a pool to the unbound claims that name it.
func (r *ClaimReconciler) claimsOfPool(ctx context.Context, o client.Object) []reconcile.Request {
	return r.unboundClaims(ctx, o.GetNamespace(), o.GetName())
}

func (r *ClaimReconciler) unboundClaims(ctx context.Context, namespace, pool string) []reconcile.Request {
	var claims extv1beta1.SandboxClaimList
	if err := r.Client.List(ctx, &claims, client.InNamespace(namespace), client.MatchingFields{extv1beta1.IndexWarmPoolRef: pool}); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.Status.Sandbox.Name != "" {
			continue
		}
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
	}
	return out
}

// claimsOfTemplate maps a template to the unbound claims of the pools that
// name it.
func (r *ClaimReconciler) claimsOfTemplate(ctx context.Context, o client.Object) []reconcile.Request {
	var pools extv1beta1.SandboxWarmPoolList
	if err := r.Client.List(ctx, &pools, client.InNamespace(o.GetNamespace()), client.MatchingFields{extv1beta1.IndexTemplateRef: o.GetName()}); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, p := range pools.Items {
		out = append(out, r.unboundClaims(ctx, p.Namespace, p.Name)...)
	}
	return out
}

func (r *ClaimReconciler) recall(c *extv1beta1.SandboxClaim) *binding {
	b, _ := r.memory.binding.Recall(client.ObjectKeyFromObject(c), c.UID)
	return b
}

func (r *ClaimReconciler) forget(key types.NamespacedName, _ *extv1beta1.SandboxClaim) {
	r.memory.status.Forget(key)
	r.memory.binding.Forget(key)
	r.memory.annotations.Forget(key)
	r.Engine.Forget("SandboxClaim", key.Namespace, key.Name)
}

// statuses is where the claim reconciler's status writer writes.
func (r *ClaimReconciler) statuses() statusWriter[[]metav1.Condition] {
	return statusWriter[[]metav1.Condition]{engine: r.Engine, memory: &r.memory.status, clock: r.Clock}
}

// Reconcile brings one claim closer to being served. A claim being deleted
// is left to garbage collection, which removes the Sandbox it owns.
func (r *ClaimReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return r.skeleton.run(ctx, req, objectKind[*extv1beta1.SandboxClaim]{
		controller: "sandboxclaim", reader: r.Client, deletion: forgetDeleting,
		object: func() *extv1beta1.SandboxClaim { return &extv1beta1.SandboxClaim{} },
		forget: r.forget, body: r.reconcile,
	})
}

func (r *ClaimReconciler) reconcile(ctx context.Context, claim *extv1beta1.SandboxClaim) (_ reconcile.Result, err error) {
	ctx, span := reconcileSpan(ctx, r.Tracer, "SandboxClaim.reconcile", claim)
	defer func() { endReconcileSpan(span, err) }()
	now := r.Clock.Now()
	b := r.recall(claim)
	if b == nil {
		b = &binding{seen: now}
		r.memory.binding.Remember(client.ObjectKeyFromObject(claim), claim.UID, b)
	}

	in := render.ClaimPlanInputs{
		Claim: claim, ExpiredHere: b.expired, Seen: b.seen, ReadyAt: b.readyAt,
		Previous: claimStatus.previous(&r.memory.status, claim), Now: now, FieldManager: r.Engine.FieldManager(),
		TraceContext: traceContext(ctx),
	}
	if err := r.bound(ctx, claim, b, &in); err != nil {
		return reconcile.Result{}, err
	}
	// Expiry comes first: an expired claim never binds again.
	if expired, _ := render.ClaimExpired(in); expired {
		return r.expire(ctx, claim, b, in)
	}
	if in.SandboxName == "" {
		return r.bindClaim(ctx, claim, b, in)
	}
	plan, _, err := render.PlanClaim(in)
	if err != nil {
		return reconcile.Result{}, err
	}
	result := recheck(plan, now)
	if in.Pending && (result.RequeueAfter == 0 || result.RequeueAfter > ssa.CreateExpectation) {
		result.RequeueAfter = ssa.CreateExpectation
	}
	// A second Sandbox goes, the status is reported, then the annotations
	// are recorded (the status may report the claim Ready for the first
	// time).
	for _, s := range plan.Steps {
		switch s.Action {
		case render.ActionDelete:
			if _, err := execute(ctx, r.Engine, s); err != nil {
				return reconcile.Result{}, err
			}
			log.FromContext(ctx).Info("removed a second Sandbox bound to the claim by a concurrent controller", "sandbox", s.Name, "kept", in.SandboxName)
		case render.ActionStatus:
			if err := r.writeStatus(ctx, claim, b, s.Object.(*extac.SandboxClaimApplyConfiguration)); err != nil {
				return result, err
			}
		case render.ActionAnnotate:
			if _, err := r.writeAnnotations(ctx, s); err != nil {
				return result, err
			}
		}
	}
	return result, nil
}

// recheck is the result that looks at a claim again when its plan says.
func recheck(plan render.Plan, now time.Time) reconcile.Result {
	if plan.RecheckAt == nil {
		return reconcile.Result{}
	}
	return reconcile.Result{RequeueAfter: plan.RecheckAt.Sub(now)}
}

// bound finds the Sandbox bound to a claim: the one it controls as the cache
// shows it, or the one this process bound it to moments ago. It fills in
// the Sandbox (nil when not seen), its name (empty when none is bound),
// whether it is still expected to show up, the other Sandboxes the claim
// controls and the one this process bound it to moments ago, if any.
func (r *ClaimReconciler) bound(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, in *render.ClaimPlanInputs) error {
	var list sandboxv1beta1.SandboxList
	if err := r.Client.List(ctx, &list, client.InNamespace(claim.Namespace), controlledBy(claim, extv1beta1.ClaimKind)); err != nil {
		return fmt.Errorf("listing sandboxes: %w", err)
	}
	if len(list.Items) > 0 {
		b.uncertain = nil
	} else if b.uncertain != nil {
		live, err := r.resolveUncertain(ctx, claim, b, in.Now)
		if err != nil {
			return err
		}
		if live != nil {
			list.Items = []sandboxv1beta1.Sandbox{*live}
		}
	}
	fresh := b.name != "" && in.Now.Sub(b.at) < bindingHold
	if fresh {
		in.Holding = b.name
	}
	if len(list.Items) > 0 {
		sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
		want := claim.Status.Sandbox.Name
		if want == "" {
			want = b.name
		}
		pick := &list.Items[0]
		for i := range list.Items {
			if list.Items[i].Name == want {
				pick = &list.Items[i]
			}
		}
		for i := range list.Items {
			if list.Items[i].Name != pick.Name {
				in.Others = append(in.Others, &list.Items[i])
			}
		}
		if b.name == "" {
			b.name = pick.Name
		}
		in.Sandbox, in.SandboxName = pick, pick.Name
		return nil
	}
	if fresh {
		// Bound by us moments ago; the cache has not caught up.
		in.Sandbox, in.SandboxName, in.Pending = b.sandbox, b.name, b.sandbox == nil
		return nil
	}
	in.SandboxName = b.name
	if in.SandboxName == "" {
		in.SandboxName = claim.Status.Sandbox.Name
	}
	// Bound once, and the Sandbox is gone (or no longer ours): report it
	// missing rather than binding another, which would lose the state the
	// user expects to find.
	return nil
}
