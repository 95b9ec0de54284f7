package faults

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// foreignBound counts the claims bound (by their status) to a Sandbox their
// pool did not make: one whose controller, when the recorder first saw it
// (else now), was neither the claim's pool (our group and kind, the pool's
// name, and its UID while the pool exists) nor the claim itself (a cold
// start, our group and kind, the claim's name and UID). The owners are
// compared by API group, kind, name and UID, so a reference that copies a
// UID under another group counts as foreign.
func (r *recorder) foreignBound(t *testing.T, claims []extv1beta1.SandboxClaim, sbs []sandboxv1beta1.Sandbox, pools []extv1beta1.SandboxWarmPool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	poolUID := map[string]types.UID{}
	for _, p := range pools {
		poolUID[p.Name] = p.UID
	}
	foreign := 0
	for _, cl := range claims {
		sb := findSandbox(sbs, cl.Status.Sandbox.Name)
		if sb == nil {
			continue
		}
		ref, seen := r.firstController[sb.UID]
		if !seen {
			ref = metav1.GetControllerOf(sb)
		}
		madeByPool := ref != nil && sandboxv1beta1.RefersTo(*ref, extv1beta1.WarmPoolKind) && ref.Name == cl.Spec.WarmPoolRef.Name &&
			(poolUID[ref.Name] == "" || poolUID[ref.Name] == ref.UID)
		madeForClaim := ref != nil && sandboxv1beta1.RefersTo(*ref, extv1beta1.ClaimKind) && ref.Name == cl.Name && ref.UID == cl.UID
		if !madeByPool && !madeForClaim {
			foreign++
			t.Logf("claim %s is bound to Sandbox %s, first controlled by %+v", cl.Name, sb.Name, ref)
		}
	}
	return foreign
}

// lookalike is a Sandbox a tenant makes with spec and labels copied from
// model, controlled (by its reference) by owner's name and UID under
// apiVersion and kind.
func lookalike(ns, name string, model *sandboxv1beta1.Sandbox, apiVersion, kind string, owner metav1.Object) *sandboxv1beta1.Sandbox {
	return &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: maps.Clone(model.Labels),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner.GetName(), UID: owner.GetUID(),
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: *model.Spec.DeepCopy(),
	}
}

// TestTenantInjectsSandboxes: a tenant tries to inject a Sandbox into
// another namespace's pool or claim. The controller runs without the
// webhook (the worst case: nothing refuses the forged references at
// admission), the tenant may create Sandboxes in the victim's namespace and
// in its own, and reads the victim's pool, members and claims. It makes
// Ready look-alike members (a real member's spec and labels, a controller
// reference with the pool's name and UID under another group, or the
// Sandbox group), squats the name of a waiting claim with a Sandbox
// "controlled" by that claim under another group, baits waiting claims
// with Sandboxes carrying their UIDs, and makes members and claim Sandboxes
// in its own namespace naming the victim's pool and claim, all written under
// the controller's field manager name. Then the victim's
// claims arrive. Invariant: 0 claims bound to a Sandbox their pool did not
// make; the pool counts only its own members and deletes none of the
// tenant's; the squatted claim is refused with upstream's message.
func TestTenantInjectsSandboxes(t *testing.T) {
	c := newClient(t)
	ctrl := startController(t, "tenant", "--leader-elect=false")
	ctx := context.Background()
	victim, tenant := namespace(t, c, "tenant-victim"), namespace(t, c, "tenant-attacker")
	rec := record(t, victim)
	const poolSize, claims = 5, 10
	waiting := []string{"late-00", "late-01", "late-02", "late-03"}
	objs := []client.Object{template(victim, "tmpl"), pool(victim, "pool", "tmpl", poolSize), template(tenant, "tmpl"), pool(tenant, "pool", "tmpl", 0)}
	for _, name := range waiting {
		// Their pool does not exist yet: they wait, unbound.
		objs = append(objs, claim(victim, name, "late"))
	}
	if err := send(c, objs); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Minute, "the victim's pool is full", poolReady(c, victim, "pool", poolSize))

	// What the tenant reads.
	p := &extv1beta1.SandboxWarmPool{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: victim, Name: "pool"}, p); err != nil {
		t.Fatal(err)
	}
	var list sandboxv1beta1.SandboxList
	if err := c.List(ctx, &list, client.InNamespace(victim)); err != nil || len(list.Items) == 0 {
		t.Fatalf("listing members: %v (%d)", err, len(list.Items))
	}
	member := &list.Items[0]
	late := map[string]*extv1beta1.SandboxClaim{}
	for _, name := range waiting {
		cl := &extv1beta1.SandboxClaim{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: victim, Name: name}, cl); err != nil {
			t.Fatal(err)
		}
		late[name] = cl
	}
	ours := extv1beta1.GroupVersion.String()
	const evil = "evil.example.com/v1"
	forged := []*sandboxv1beta1.Sandbox{
		lookalike(victim, "fake-member-evil", member, evil, "SandboxWarmPool", p),
		lookalike(victim, "fake-member-core", member, sandboxv1beta1.GroupVersion.String(), "SandboxWarmPool", p),
		lookalike(victim, "late-00", member, evil, "SandboxClaim", late["late-00"]),
		lookalike(victim, "bait-01", member, evil, "SandboxClaim", late["late-01"]),
		lookalike(victim, "bait-02", member, sandboxv1beta1.GroupVersion.String(), "SandboxClaim", late["late-02"]),
		lookalike(tenant, "cross-member", member, ours, "SandboxWarmPool", p),
		lookalike(tenant, "cross-claim", member, ours, "SandboxClaim", late["late-03"]),
	}
	for _, sb := range forged {
		// The pool's label on a claim bait would keep it from running.
		if sb.OwnerReferences[0].Kind == "SandboxClaim" { // whatever its group
			delete(sb.Labels, sandboxv1beta1.LabelWarmPoolSandbox)
		}
		// Under the controller's field manager name: anyone may use it.
		if err := c.Create(ctx, sb, client.FieldOwner("agent-sandbox-controller")); err != nil {
			t.Fatalf("the tenant creates %s/%s: %v", sb.Namespace, sb.Name, err)
		}
	}
	waitFor(t, 2*time.Minute, "the look-alike members run", func() error {
		for _, name := range []string{"fake-member-evil", "fake-member-core"} {
			sb := &sandboxv1beta1.Sandbox{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: victim, Name: name}, sb); err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(sb.Status.Conditions, sandboxv1beta1.ConditionReady) {
				return fmt.Errorf("%s not Ready", name)
			}
		}
		return nil
	})

	// The victim's claims arrive, and the waiting claims' pool.
	start := time.Now()
	objs = []client.Object{pool(victim, "late", "tmpl", 0)}
	for i := range claims {
		objs = append(objs, claim(victim, fmt.Sprintf("c-%02d", i), "pool"))
	}
	if err := send(c, objs); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Minute, "the victim's claims settle", func() error {
		var cls extv1beta1.SandboxClaimList
		if err := c.List(ctx, &cls, client.InNamespace(victim)); err != nil {
			return err
		}
		// Bound and Ready, or refused: then the invariants are counted.
		for _, cl := range cls.Items {
			r := meta.FindStatusCondition(cl.Status.Conditions, extv1beta1.ConditionReady)
			if r == nil || (r.Status != metav1.ConditionTrue && r.Reason != extv1beta1.ReasonReconcilerError) {
				return fmt.Errorf("claim %s: Ready %+v", cl.Name, r)
			}
		}
		return nil
	})
	took := time.Since(start)
	waitFor(t, 3*time.Minute, "the victim's pool refills", poolReady(c, victim, "pool", poolSize))
	// The pool keeps counting only its own members.
	time.Sleep(3 * time.Second)
	if err := poolReady(c, victim, "pool", poolSize)(); err != nil {
		t.Errorf("pool: %v", err)
	}

	inv := check(t, c, victim, rec)
	squatted := &extv1beta1.SandboxClaim{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: victim, Name: "late-00"}, squatted); err != nil {
		t.Fatal(err)
	}
	r := meta.FindStatusCondition(squatted.Status.Conditions, extv1beta1.ConditionReady)
	if want := `Error seen: sandbox "late-00" is not controlled by claim "late-00". Please use a different claim name or delete the sandbox manually`; r.Status != metav1.ConditionFalse || r.Message != want {
		t.Errorf("the squatted claim is Ready=%s %q, want False with upstream's %q", r.Status, r.Message, want)
	}
	untouched := 0
	for _, f := range forged[:5] {
		sb := &sandboxv1beta1.Sandbox{}
		err := c.Get(ctx, client.ObjectKeyFromObject(f), sb)
		switch {
		case err != nil || sb.DeletionTimestamp != nil:
			t.Errorf("the tenant's %s was deleted (err %v)", f.Name, err)
		case len(sb.OwnerReferences) != 1 || !sameRef(sb.OwnerReferences[0], f.OwnerReferences[0]):
			t.Errorf("the tenant's %s changed owners: %+v", f.Name, sb.OwnerReferences)
		default:
			untouched++
		}
	}
	errs, examples := errorLines(t, ctrl.LogPath)
	report(t, map[string]any{"run": "tenant-injects", "seconds": took.Seconds(), "forged": len(forged),
		"forgedUntouched": untouched, "claimsBoundToForeignSandbox": inv.ClaimsBoundToForeignSandbox,
		"invariants": inv, "errorLines": errs, "examples": examples})
	if inv.ClaimsBoundToForeignSandbox != 0 {
		t.Errorf("%d claims bound to a Sandbox their pool did not make", inv.ClaimsBoundToForeignSandbox)
	}
	// The squatted claim is the one claim left unbound, by design.
	if squatted.Status.Sandbox.Name == "" {
		inv.ClaimsNotBoundToOne--
	}
	if inv.violations() > 0 {
		t.Errorf("invariants violated: %+v", inv)
	}
}

// poolReady reports nil once pool counts want members, all Ready.
func poolReady(c client.Client, ns, name string, want int32) func() error {
	return func() error {
		p := &extv1beta1.SandboxWarmPool{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, p); err != nil {
			return err
		}
		if p.Status.Replicas != want || p.Status.ReadyReplicas != want {
			return fmt.Errorf("pool %s counts %d members, %d Ready; want %d", name, p.Status.Replicas, p.Status.ReadyReplicas, want)
		}
		return nil
	}
}

func sameRef(a, b metav1.OwnerReference) bool {
	return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID &&
		ptr.Deref(a.Controller, false) == ptr.Deref(b.Controller, false)
}
