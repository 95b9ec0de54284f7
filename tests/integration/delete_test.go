package integration

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
