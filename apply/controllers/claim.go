package controllers

import (
	"context"
	"fmt"
	"sort"
	"time"

	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
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
	// SandboxIndexer, when set, is the Sandbox informer's indexer, where a
	// pool's members are read, uncopied (controlledSandboxes); nil lists
	// them through Client.
	SandboxIndexer toolscache.Indexer

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
	// uncertain is a warm member this process sent the take of, or (no
	// UID) the claim's own Sandbox it sent the create of, without learning
	// the outcome (the answer was lost: the API server went away
	// mid-request). The write may have been made, so until the Sandbox is
	// read again the claim takes nothing else (resolveUncertain): a create
	// made and not yet in the cache, then a member taken, would give the
	// claim two Sandboxes.
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
		// A claim waiting for a Sandbox goes ahead of the others
		// (claimEvents); a Sandbox it controls brings it back.
		Watches(&extv1beta1.SandboxClaim{}, claimEvents()).
		Watches(&sandboxv1beta1.Sandbox{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(),
			&extv1beta1.SandboxClaim{}, handler.OnlyControllerOwner())).
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
	// Read only: the cache's own claims, not copies of every claim of
	// the pool, bound ones included, on every change of the pool.
	if err := r.Client.List(ctx, &claims, client.InNamespace(namespace), client.MatchingFields{extv1beta1.IndexWarmPoolRef: pool}, client.UnsafeDisableDeepCopy); err != nil {
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
		forget: r.forget, body: r.reconcile, engine: r.Engine, kind: "SandboxClaim",
	})
}

// reconcile observes the claim (its Sandbox; for an expired claim a
// Sandbox of its name it does not control; for an unbound one its pool,
// template and the member the queue offers), plans with render.PlanClaim,
// has the policies judge the plan, and runs it on the executor (claimRun).
// What running it returns is the next plan's input (serve).
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
	offers, err := r.observe(ctx, claim, b, &in)
	if err != nil {
		return reconcile.Result{}, err
	}
	return r.serve(ctx, claim, b, in, offers)
}

// observe reads what the claim's phase is planned from, beyond its
// Sandbox: for an expired claim (expiry is final: this process remembers
// it, even while the cache does not show the expired status yet) a Sandbox
// of its name it does not control, named in its status in upstream's
// words; for an unbound claim its pool, template and the members the pool
// offers (observeUnbound; an error reading them is reported on the claim).
func (r *ClaimReconciler) observe(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, in *render.ClaimPlanInputs) (*offers, error) {
	none := &offers{r: r, claim: claim}
	if expired, _ := render.ClaimExpired(*in); expired {
		b.expired = true
		if in.Sandbox == nil || !extv1beta1.IsClaimedBy(in.Sandbox, claim) {
			msg, err := r.notOwned(ctx, claim, in.SandboxName)
			in.NotOwned = msg
			return none, err
		}
		return none, nil
	}
	if in.SandboxName != "" {
		return none, nil
	}
	if m, ok := claimStatus.recall(&r.memory.status, claim); ok && m.resourceVersion != "" {
		// Our own last status write is newer than the cache: a binding's
		// commit is guarded by it.
		in.Version = m.resourceVersion
	}
	offers, err := r.observeUnbound(ctx, claim, in)
	if err != nil {
		_, err = r.failed(ctx, claim, b, *in, err)
	}
	return offers, err
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

// notOwned looks, as upstream does, for the Sandbox an expired claim would
// clean up (the one its status names, else the claim's own name) and, when
// one exists that the claim does not control, says that its deletion is
// skipped, in upstream's words.
func (r *ClaimReconciler) notOwned(ctx context.Context, claim *extv1beta1.SandboxClaim, name string) (string, error) {
	if name == "" {
		name = claim.Name
	}
	sb := &sandboxv1beta1.Sandbox{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: name}, sb); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if extv1beta1.IsClaimedBy(sb, claim) {
		return "", nil
	}
	return fmt.Sprintf("Claim expired. sandbox not owned by this claim: sandbox %q is not owned by claim %q; deletion skipped.", sb.Name, claim.Name), nil
}
