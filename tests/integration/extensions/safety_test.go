package extensions

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/controllers"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/tests/manager"
)

// frozenClient shows the Sandboxes of a namespace as they were at one
// moment (a cache that stopped there); everything else, and every write,
// goes to the API server.
type frozenClient struct {
	client.Client
	sandboxes []sandboxv1beta1.Sandbox
	// pool, when set, is the pool as this client shows it.
	pool *extv1beta1.SandboxWarmPool
}

func (c frozenClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if p, ok := obj.(*extv1beta1.SandboxWarmPool); ok && c.pool != nil && key == client.ObjectKeyFromObject(c.pool) {
		c.pool.DeepCopyInto(p)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c frozenClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if l, ok := list.(*sandboxv1beta1.SandboxList); ok {
		l.Items = append([]sandboxv1beta1.Sandbox(nil), c.sandboxes...)
		return nil
	}
	return c.Client.List(ctx, list, opts...)
}

// TestPoolNeverDeletesATakenMember: a pool reconciler whose cache still
// shows a member as its own after a claim took it (the adoption's watch
// event not yet delivered), scaled to 0, must not delete the claim's
// Sandbox: its delete is guarded by the resourceVersion it saw.
func TestPoolNeverDeletesATakenMember(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 3))
	pool, members := waitPool(t, ns, "pool", 3)

	create(t, newClaim(ns, "mine", "pool"))
	c := waitClaim(t, ns, "mine", metav1.ConditionTrue, "")
	taken := c.Status.Sandbox.Name
	if taken == "" {
		t.Fatal("claim bound to no Sandbox")
	}
	change(t, ns, "pool", &extv1beta1.SandboxWarmPool{}, func(p *extv1beta1.SandboxWarmPool) { p.Spec.Replicas = ptr.To[int32](0) })
	pool, _ = get(t, ns, "pool", pool)

	stale := frozenClient{Client: env.Client, sandboxes: members}
	r := &controllers.WarmPoolReconciler{
		Client: stale, Engine: ssa.New(stale, manager.FieldManager, manager.StatusManager),
		Recorder: events.NewFakeRecorder(100), MaxBatch: 300,
	}
	r.SetDefaults()
	for range 3 {
		// A Conflict is the expected answer for the taken member.
		_, _ = r.Reconcile(ctxFor(t), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pool)})
	}
	sb, err := get(t, ns, taken, &sandboxv1beta1.Sandbox{})
	if err != nil || sb.DeletionTimestamp != nil {
		t.Fatalf("the claim's Sandbox %s was deleted by its former pool (err %v)", taken, err)
	}
	if ref := metav1.GetControllerOf(sb); ref == nil || ref.UID != c.UID {
		t.Fatalf("Sandbox %s is controlled by %v, not the claim", taken, ref)
	}
	waitClaim(t, ns, "mine", metav1.ConditionTrue, "")
}

// TestRefusedAdoptionColdStarts: when the API server refuses the adoption
// of a warm member (here a ValidatingAdmissionPolicy forbids Sandbox
// updates that add a claim), the claim does not retry forever: it gets a
// Sandbox of its own, and the member stays in the pool.
func TestRefusedAdoptionColdStarts(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	name := "no-adoption-" + ns
	vap := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{sandboxv1beta1.GroupVersion.Group}, APIVersions: []string{"*"},
						Resources: []string{"sandboxes"}},
				}}},
			},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("(has(oldObject.metadata.labels) && '%[1]s' in oldObject.metadata.labels) || !(has(object.metadata.labels) && '%[1]s' in object.metadata.labels)",
					sandboxv1beta1.LabelClaimUID),
				Message: "warm adoption is not allowed here",
				Reason:  ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	create(t, vap, binding)
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), binding)
		_ = env.Client.Delete(context.Background(), vap)
	})
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 1))
	pool, members := waitPool(t, ns, "pool", 1)
	// The policy takes effect once the API server has loaded it: wait
	// until a member update is refused.
	eventually(t, "the policy refuses adoptions", func() error {
		m := members[0].DeepCopy()
		m.Labels[sandboxv1beta1.LabelClaimUID] = "probe"
		err := env.Client.Update(ctxFor(t), m, client.DryRunAll)
		if apierrors.IsForbidden(err) {
			return nil
		}
		if err == nil {
			return errors.New("the policy is not in force yet")
		}
		if apierrors.IsConflict(err) {
			_, members = waitPool(t, ns, "pool", 1)
		}
		return fmt.Errorf("dry-run adoption: %w", err)
	})

	create(t, newClaim(ns, "c", "pool"))
	c := waitClaim(t, ns, "c", metav1.ConditionTrue, "")
	if c.Status.Sandbox.Name != "c" {
		t.Errorf("claim bound to %q, want its own cold Sandbox c", c.Status.Sandbox.Name)
	}
	if got := sandboxes(t, ns, pool.UID); len(got) != 1 || got[0].Name != members[0].Name {
		t.Errorf("pool members %v, want %s untouched", names(got), members[0].Name)
	}
}

// TestExpiredRetainClaimNeverRebinds: a claim that expired (Retain, TTL 0
// after its Sandbox finished) keeps no Sandbox; a controller started
// afterwards, with no memory of the claim, must not bind it a new one.
func TestExpiredRetainClaimNeverRebinds(t *testing.T) {
	ns := finishedJob(t, 0, extv1beta1.ShutdownPolicyRetain)
	c := waitClaim(t, ns, "job", metav1.ConditionFalse, extv1beta1.ReasonClaimExpired)
	// With TTL 0 the claim expires in the pass that first sees the Sandbox
	// Finished; Finished is still mirrored, as upstream does.
	if f := findCondition(c.Status.Conditions, extv1beta1.ConditionFinished); f == nil || f.Status != metav1.ConditionTrue {
		t.Errorf("expired claim's Finished is %+v, want True mirrored from the Sandbox", f)
	}
	eventually(t, "Retain deletes the Sandbox", func() error {
		if _, err := get(t, ns, "job", &sandboxv1beta1.Sandbox{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("sandbox still there (%w)", err)
		}
		return nil
	})

	restarted, err := manager.Start(env.Config, env.Scheme, manager.Options{Extensions: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = restarted.Stop() })
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if sb, err := get(t, ns, "job", &sandboxv1beta1.Sandbox{}); err == nil {
			t.Fatalf("a restarted controller bound the expired claim a new Sandbox (%s)", sb.UID)
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitClaim(t, ns, "job", metav1.ConditionFalse, extv1beta1.ReasonClaimExpired)
}

// TestPoolSkipsAMemberAClaimHolds: a member a claim has taken from the
// queue (its adoption in flight) is not deleted by a scale down, even with
// preconditions that would let the delete through (nothing changed it),
// and the pool looks again shortly, since a claim handing it back sends no
// event.
func TestPoolSkipsAMemberAClaimHolds(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 2))
	pool, members := waitPool(t, ns, "pool", 2)
	// Only this reconciler sees the pool scaled to 0 (the running
	// controller keeps it at 2 and would delete members itself).
	pool.Spec.Replicas = ptr.To[int32](0)

	queue := controllers.NewWarmQueue()
	for i := range members {
		queue.Handler().OnAdd(&members[i], false)
	}
	held := queue.Take(client.ObjectKeyFromObject(pool), nil)
	if held == nil {
		t.Fatal("nothing to take")
	}
	frozen := frozenClient{Client: env.Client, sandboxes: members, pool: pool}
	r := &controllers.WarmPoolReconciler{
		Client: frozen, Engine: ssa.New(frozen, manager.FieldManager, manager.StatusManager),
		Recorder: events.NewFakeRecorder(100), MaxBatch: 300, Queue: queue,
	}
	r.SetDefaults()
	res, err := r.Reconcile(ctxFor(t), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pool)})
	if err != nil {
		// The other member may have changed meanwhile (the running
		// controller); what matters is the held one.
		t.Logf("reconcile: %v", err)
	}
	if sb, err := get(t, ns, held.Name, &sandboxv1beta1.Sandbox{}); err != nil || sb.DeletionTimestamp != nil {
		t.Fatalf("the member a claim holds was deleted (err %v)", err)
	}
	if err == nil && (res.RequeueAfter == 0 || res.RequeueAfter > 5*time.Second) {
		t.Errorf("pool asks to look again after %v, want soon", res.RequeueAfter)
	}
}
