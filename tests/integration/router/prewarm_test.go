package router

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/router"
)

// TestOnlyPoolMembersArePrewarmed plays a tenant who labels Pods of its
// own as warm pool members' to take the router's prewarm slots: the
// router's cache reports a Pod as one to connect ahead only when a Sandbox
// controls it (API group, kind, name and UID) that a SandboxWarmPool
// controls and no claim took. A Pod with the labels and no controller, one
// whose reference copies the member's name and UID under another kind,
// and one controlled by a standalone Sandbox are not; the member's own Pod
// is, until its label goes.
func TestOnlyPoolMembersArePrewarmed(t *testing.T) {
	ns := env.Namespace(t)
	var mu sync.Mutex
	seen := map[types.UID]bool{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cache, err := router.NewCache(ctx, env.Config, router.CacheOptions{Namespaces: []string{ns},
		OnPoolPod: func(p *corev1.Pod, unclaimedReady bool) {
			mu.Lock()
			defer mu.Unlock()
			seen[p.UID] = unclaimedReady
		}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = cache.Start(ctx) }()
	if !cache.WaitForCacheSync(ctx) {
		t.Fatal("the router's cache did not sync")
	}

	poolLabel := map[string]string{sandboxv1beta1.LabelWarmPoolSandbox: "abcd1234"}
	member := createSandbox(t, ns, "member", controller(extv1beta1.GroupVersion.String(), "SandboxWarmPool", "pool"), poolLabel, nil)
	standalone := createSandbox(t, ns, "standalone", nil, poolLabel, nil)
	pods := map[string]*corev1.Pod{}
	for name, owner := range map[string]*metav1.OwnerReference{
		"member-pod":     {APIVersion: sandboxv1beta1.GroupVersion.String(), Kind: "Sandbox", Name: member.Name, UID: member.UID, Controller: ptr.To(true)},
		"orphan":         nil,
		"other-kind":     {APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxClaim", Name: member.Name, UID: member.UID, Controller: ptr.To(true)},
		"standalone-pod": {APIVersion: sandboxv1beta1.GroupVersion.String(), Kind: "Sandbox", Name: standalone.Name, UID: standalone.UID, Controller: ptr.To(true)},
	} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{sandboxv1beta1.LabelSandboxNameHash: "0badc0de", sandboxv1beta1.LabelWarmPoolSandbox: "abcd1234"}},
			Spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false), Containers: member.Spec.PodTemplate.Spec.Containers}}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		if err := env.Client.Create(ctxFor(t), p); err != nil {
			t.Fatal(err)
		}
		setReady(t, p, "10.0.0.9")
		pods[name] = p
	}
	verdicts := func() (map[string]bool, error) {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]bool{}
		for name, p := range pods {
			v, ok := seen[p.UID]
			if !ok {
				return nil, fmt.Errorf("no event for Pod %s yet", name)
			}
			out[name] = v
		}
		return out, nil
	}
	want := map[string]bool{"member-pod": true, "orphan": false, "other-kind": false, "standalone-pod": false}
	var last error
	defer func() {
		if t.Failed() && last != nil {
			t.Log(last) // why the wait below ran out
		}
	}()
	waitUntil(t, 30*time.Second, "every Pod judged as wanted", func() bool {
		got, err := verdicts()
		for name, w := range want {
			if err == nil && got[name] != w {
				err = fmt.Errorf("pod %s: connect ahead %v, want %v", name, got[name], w)
			}
		}
		last = err
		return err == nil
	})

	// A claim takes the member: its Pod's label goes, and with it the
	// connection ahead.
	p := pods["member-pod"]
	p.Labels = map[string]string{sandboxv1beta1.LabelSandboxNameHash: "0badc0de"}
	if err := env.Client.Update(ctxFor(t), p); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the taken member's Pod is no longer connected ahead", func() bool {
		got, _ := verdicts()
		return !got["member-pod"]
	})
}
