package controllers

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// TestPoolMembersAreThePoolsOwn: the index returns the Sandboxes the pool
// controls, the cache's own objects, and none that only look like its
// members: a namesake pool's (another UID), one controlled by a pool of
// another API group, one in another namespace, one the pool owns without
// controlling, one a claim controls.
func TestPoolMembersAreThePoolsOwn(t *testing.T) {
	informer := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{
		ListFunc:  func(metav1.ListOptions) (runtime.Object, error) { return &sandboxv1beta1.SandboxList{}, nil },
		WatchFunc: func(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
	}, &sandboxv1beta1.Sandbox{}, 0, toolscache.Indexers{})
	members, err := NewPoolMembers(informer)
	if err != nil {
		t.Fatal(err)
	}
	pool := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "pool-uid"}}

	a, b := member("a", "p", true), member("b", "p", false)
	namesake := member("namesake", "p", true)
	namesake.OwnerReferences[0].UID = "other-uid"
	otherGroup := member("other-group", "p", true)
	otherGroup.OwnerReferences[0].APIVersion = "evil.example.com/v1"
	elsewhere := member("elsewhere", "p", true)
	elsewhere.Namespace = "other"
	notController := member("not-controller", "p", true)
	notController.OwnerReferences[0].Controller = nil
	claimed := member("claimed", "p", true)
	claimed.OwnerReferences[0].Kind, claimed.OwnerReferences[0].Name = "SandboxClaim", "c"
	for _, sb := range []*sandboxv1beta1.Sandbox{a, b, namesake, otherGroup, elsewhere, notController, claimed} {
		if err := informer.GetIndexer().Add(sb); err != nil {
			t.Fatal(err)
		}
	}

	got, err := members.Of(context.Background(), nil, pool)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sb := range got {
		names = append(names, sb.Name)
		if sb != a && sb != b {
			t.Errorf("%s is not the cache's own object", sb.Name)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("members of the pool: %v, want [a b]", names)
	}

	// A member taken by a claim leaves the pool's index with the update.
	taken := a.DeepCopy()
	taken.OwnerReferences[0].Kind, taken.OwnerReferences[0].Name, taken.OwnerReferences[0].UID = "SandboxClaim", "c", "claim-uid"
	if err := informer.GetIndexer().Update(taken); err != nil {
		t.Fatal(err)
	}
	if got, _ := members.Of(context.Background(), nil, pool); len(got) != 1 || got[0].Name != "b" {
		t.Fatalf("after a's take the pool has %d members, want b alone", len(got))
	}
}
