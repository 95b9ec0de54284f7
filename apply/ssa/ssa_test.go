package ssa

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestChangeSetString(t *testing.T) {
	set := ChangeSet{
		{Kind: "Service", Namespace: "ns", Name: "box", Action: Created},
		{Kind: "Pod", Namespace: "ns", Name: "box", Action: Unchanged},
		{Kind: "PersistentVolumeClaim", Namespace: "ns", Name: "data-box", Action: Configured},
	}
	want := "PersistentVolumeClaim/ns/data-box: configured\nPod/ns/box: unchanged\nService/ns/box: created"
	if got := set.String(); got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
	reversed := ChangeSet{set[2], set[1], set[0]}
	if reversed.String() != want {
		t.Errorf("String() depends on order")
	}
	if !set.Changed() || (ChangeSet{{Action: Unchanged}}).Changed() {
		t.Errorf("Changed() wrong")
	}
	if set.Pending() || !(ChangeSet{{Action: Unchanged, Pending: true}}).Pending() {
		t.Errorf("Pending() wrong")
	}
}

func TestWrapConflict(t *testing.T) {
	change := Change{Kind: "Pod", Namespace: "ns", Name: "box"}
	ownership := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 409, Reason: metav1.StatusReasonConflict,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{
			Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "human": .metadata.labels.app`,
		}}},
	}}
	err := wrapConflict("Pod", change, ownership)
	var c *ConflictError
	if !errors.As(err, &c) || len(c.Fields) != 1 || !IsConflict(err) || !apierrors.IsConflict(err) {
		t.Fatalf("ownership conflict not recognised: %v", err)
	}
	if got := c.Error(); got != `Pod ns/box: fields owned by another field manager conflict with ours: conflict with "human": .metadata.labels.app` {
		t.Errorf("message = %q", got)
	}
	optimistic := apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "box", errors.New("the object has been modified"))
	if err := wrapConflict("Pod", change, optimistic); IsConflict(err) || !apierrors.IsConflict(err) {
		t.Errorf("an optimistic-concurrency conflict must stay a plain API conflict: %v", err)
	}
}

func TestRecentlyCreatedExpectation(t *testing.T) {
	e := New(nil, "m", "s")
	c := objectKey("Pod", "m", "ns", "box")
	desired := map[string]string{"image": "a"}
	e.noteWrite(c, "", true, desired, Fingerprint(desired))
	if !e.recentlyCreated(c, desired) {
		t.Errorf("a create we just sent is not expected")
	}
	if e.recentlyCreated(c, map[string]string{"image": "b"}) {
		t.Errorf("a different desired object must not be covered by the expectation")
	}
	e.Forget("Pod", "ns", "box")
	if e.recentlyCreated(c, desired) {
		t.Errorf("Forget did not drop the expectation")
	}
}
