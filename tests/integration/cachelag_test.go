package integration

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/reconciler/apply/ssa"
)

// TestDeleteSentOnce: a reconcile that runs again before the cache shows
// its delete (the object read as it was) sends no second delete of the
// same object, while a refused delete, and a namesake made after the
// delete, are still deleted for real.
func TestDeleteSentOnce(t *testing.T) {
	ctx := ctxFor(t)
	ns := env.Namespace(t)
	e := ssa.New(env.Client, testManager, testManager+"-status")
	const hold = "test.agents.x-k8s.io/hold"
	create := func() *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "once", Finalizers: []string{hold}}}
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		return cm
	}
	release := func(cm *corev1.ConfigMap) {
		live := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), live); err != nil {
			t.Fatal(err)
		}
		live.Finalizers = nil
		if err := env.Client.Update(ctx, live); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	sent := func() int64 { return e.Stats().Deletes }

	stale := create()
	// A delete the API server refuses (a resourceVersion that moved on)
	// is not remembered as made.
	old := "1"
	if _, err := e.Delete(ctx, "ConfigMap", stale, client.Preconditions{ResourceVersion: &old}); !apierrors.IsConflict(err) {
		t.Fatalf("delete guarded by a stale resourceVersion: %v, want a conflict", err)
	}
	before := sent()
	change, err := e.Delete(ctx, "ConfigMap", stale)
	if err != nil || change.Action != ssa.Deleted || sent() != before+1 {
		t.Fatalf("first delete: %+v, %v (sent %d)", change, err, sent()-before)
	}
	// stale still shows no deletionTimestamp: the cache has not caught up.
	change, err = e.Delete(ctx, "ConfigMap", stale)
	if err != nil || change.Action != ssa.Unchanged || !change.Pending || sent() != before+1 {
		t.Fatalf("second delete of the same object: %+v, %v (sent %d), want nothing sent, pending", change, err, sent()-before)
	}
	live := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(stale), live); err != nil || live.DeletionTimestamp == nil {
		t.Fatalf("the object after the first delete: %v (deletionTimestamp %v)", err, live.DeletionTimestamp)
	}
	release(stale)

	// A namesake made since is another object: its delete is sent.
	namesake := create()
	defer release(namesake)
	if namesake.UID == stale.UID {
		t.Fatal("the namesake has the old UID")
	}
	change, err = e.Delete(ctx, "ConfigMap", namesake)
	if err != nil || change.Action != ssa.Deleted || sent() != before+2 {
		t.Fatalf("delete of a namesake: %+v, %v (sent %d)", change, err, sent()-before)
	}
}

// TestApplyAheadOfCache: an apply of what we applied moments ago, judged
// against an object read before that write (the cache behind it), is not
// sent again; once the object has moved past our write (another writer
// took the field), the same apply is judged against it and sent.
func TestApplyAheadOfCache(t *testing.T) {
	ctx := ctxFor(t)
	ns := env.Namespace(t)
	e := ssa.New(env.Client, testManager, testManager+"-status")
	stale := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ahead"}}
	if err := env.Client.Create(ctx, stale); err != nil {
		t.Fatal(err)
	}
	desired := func(v string) *corev1ac.ConfigMapApplyConfiguration {
		return corev1ac.ConfigMap("ahead", ns).WithAnnotations(map[string]string{"example.com/pod": v})
	}
	apply := func(live *corev1.ConfigMap, v string) ssa.Change {
		t.Helper()
		change, err := ssa.Apply(ctx, e, "ConfigMap", desired(v), live, corev1ac.ExtractConfigMap, ssa.Options{Force: true})
		if err != nil {
			t.Fatal(err)
		}
		return change
	}
	sent := func() int64 { return e.Stats().Applies }

	before := sent()
	if c := apply(stale, "a"); c.Action != ssa.Configured || sent() != before+1 {
		t.Fatalf("first apply: %+v (sent %d)", c, sent()-before)
	}
	if c := apply(stale, "a"); c.Action != ssa.Unchanged || !c.Pending || sent() != before+1 {
		t.Fatalf("the same apply against the object read before it: %+v (sent %d), want nothing sent, pending", c, sent()-before)
	}
	// Another value is another intent: sent.
	if c := apply(stale, "b"); c.Action != ssa.Configured || sent() != before+2 {
		t.Fatalf("another value against the stale object: %+v (sent %d)", c, sent()-before)
	}
	if c := apply(stale, "b"); c.Action != ssa.Unchanged || sent() != before+2 {
		t.Fatalf("that value again against the stale object: %+v (sent %d)", c, sent()-before)
	}
	// Another writer takes the annotation after our write: the object as
	// read now is newer than our write, and our apply is sent again.
	other := desired("theirs")
	if err := env.Client.Apply(ctx, other, client.FieldOwner("someone-else"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	fresh := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(stale), fresh); err != nil {
		t.Fatal(err)
	}
	if c := apply(fresh, "b"); c.Action != ssa.Configured || sent() != before+3 {
		t.Fatalf("our apply against an object changed after it: %+v (sent %d), want it sent", c, sent()-before)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(stale), fresh); err != nil || fresh.Annotations["example.com/pod"] != "b" {
		t.Fatalf("annotation after our apply: %v, %q", err, fresh.Annotations["example.com/pod"])
	}
}
