package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// collidingNames finds two Sandbox names with the same 32-bit name hash
// (the sandbox-name-hash label) by a birthday search: tens of thousands of
// hashes, well under a second.
func collidingNames(t *testing.T) (string, string) {
	t.Helper()
	seen := map[string]string{}
	for i := range 10_000_000 {
		name := "c-" + strconv.FormatInt(int64(i), 36)
		h := render.NameHash(name)
		if other, ok := seen[h]; ok {
			return other, name
		}
		seen[h] = name
	}
	t.Fatal("no colliding names found")
	return "", ""
}

// endpointPods lists the Pods behind a Service, by name, from its
// EndpointSlices (as the cluster's endpoint controller computes them).
func endpointPods(ctx context.Context, c client.Client, ns, svc string) ([]string, error) {
	var slices discoveryv1.EndpointSliceList
	if err := c.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: svc}); err != nil {
		return nil, err
	}
	var pods []string
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
				pods = append(pods, e.TargetRef.Name)
			}
		}
	}
	return pods, nil
}

// selects reports whether a NetworkPolicy's podSelector matches a Pod.
func selects(t *testing.T, np *networkingv1.NetworkPolicy, p *corev1.Pod) bool {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	return sel.Matches(labels.Set(p.Labels))
}

// TestSandboxNetworkPolicyAndCollisionFreeSelectors: the Pods of Sandboxes
// made without a template fall under the namespace's default-deny
// NetworkPolicy, owned by the Namespace by UID, which admits ingress only
// from the sandbox router; a Pod someone labelled with a Sandbox's name
// hash is under neither that policy nor the Sandbox's Service, and neither
// is the Pod of another Sandbox whose name hashes the same behind the
// Service; the policy, deleted, is made again; annotating a Sandbox
// network-policy-management=Unmanaged takes its Pod out of the policy, and
// a Sandbox made Unmanaged is never in it.
func TestSandboxNetworkPolicyAndCollisionFreeSelectors(t *testing.T) {
	c := newClient(t)
	ns := namespace(t, c)
	ctx := context.Background()
	victim, attacker := collidingNames(t)
	t.Logf("%s and %s both hash to %s", victim, attacker, render.NameHash(victim))
	for _, name := range []string{victim, attacker} {
		if err := c.Create(ctx, sandbox(ns, name)); err != nil {
			t.Fatal(err)
		}
	}
	// A Pod labelled by hand with the victim's name hash.
	forged := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: ns,
			Labels: map[string]string{sandboxv1beta1.LabelSandboxNameHash: render.NameHash(victim)}},
		Spec: corev1.PodSpec{RuntimeClassName: ptr.To("gvisor"),
			Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10", Ports: []corev1.ContainerPort{{ContainerPort: 8888}}}}},
	}
	if err := c.Create(ctx, forged); err != nil {
		t.Fatal(err)
	}
	vkey, akey := types.NamespacedName{Namespace: ns, Name: victim}, types.NamespacedName{Namespace: ns, Name: attacker}
	for _, key := range []types.NamespacedName{vkey, akey} {
		waitFor(t, 90*time.Second, key.Name+" Ready", readyIs(c, key, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady))
	}
	waitFor(t, 60*time.Second, "the forged Pod has an IP", func() error {
		p := &corev1.Pod{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: forged.Name}, p); err != nil {
			return err
		}
		if p.Status.PodIP == "" {
			return errors.New("no IP yet")
		}
		return nil
	})

	// The namespace's NetworkPolicy: the Namespace's, default-deny both
	// ways, selecting both Sandboxes' Pods and not the forged one.
	vpod, apod, fpod := &corev1.Pod{}, &corev1.Pod{}, &corev1.Pod{}
	nsObj := &corev1.Namespace{}
	if err := errors.Join(c.Get(ctx, vkey, vpod), c.Get(ctx, akey, apod),
		c.Get(ctx, types.NamespacedName{Namespace: ns, Name: forged.Name}, fpod), c.Get(ctx, types.NamespacedName{Name: ns}, nsObj)); err != nil {
		t.Fatal(err)
	}
	npKey := types.NamespacedName{Namespace: ns, Name: render.NamespaceNetworkPolicyName}
	np := &networkingv1.NetworkPolicy{}
	if err := c.Get(ctx, npKey, np); err != nil {
		t.Fatalf("the namespace's NetworkPolicy: %v", err)
	}
	if !render.OwnedByNamespace(np, nsObj.UID) {
		t.Errorf("NetworkPolicy owners %+v, want the Namespace %s (uid %s)", np.OwnerReferences, ns, nsObj.UID)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
		t.Errorf("policyTypes %v, want Ingress and Egress", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].From[0].PodSelector == nil ||
		np.Spec.Ingress[0].From[0].PodSelector.MatchLabels[render.RouterLabelKey] != render.RouterLabelValue {
		t.Errorf("ingress %+v, want only the sandbox router's Pods", np.Spec.Ingress)
	}
	for _, p := range []*corev1.Pod{vpod, apod} {
		if !selects(t, np, p) {
			t.Errorf("the NetworkPolicy does not select Pod %s (labels %v)", p.Name, p.Labels)
		}
	}
	if selects(t, np, fpod) {
		t.Errorf("the NetworkPolicy selects the forged Pod (labels %v)", fpod.Labels)
	}
	if err := gone(c, vkey, &networkingv1.NetworkPolicy{})(); err != nil {
		t.Errorf("a Sandbox has a NetworkPolicy of its own: %v", err)
	}

	// Deleted, it is made again.
	if err := c.Delete(ctx, np); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the namespace's NetworkPolicy made again", func() error {
		again := &networkingv1.NetworkPolicy{}
		if err := c.Get(ctx, npKey, again); err != nil {
			return err
		}
		if again.UID == np.UID {
			return errors.New("not deleted yet")
		}
		if !render.OwnedByNamespace(again, nsObj.UID) {
			return fmt.Errorf("owners %+v", again.OwnerReferences)
		}
		return nil
	})

	// The victim's Service: its Pod only. The attacker's Service lists the
	// attacker's Pod first, so the endpoint controller has seen it.
	waitFor(t, 60*time.Second, "both Services list their own Pod", func() error {
		for _, key := range []types.NamespacedName{vkey, akey} {
			pods, err := endpointPods(ctx, c, ns, key.Name)
			if err != nil {
				return err
			}
			if !slices.Contains(pods, key.Name) {
				return fmt.Errorf("service %s: endpoints %v", key.Name, pods)
			}
		}
		return nil
	})
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		pods, err := endpointPods(ctx, c, ns, victim)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(pods, attacker) || slices.Contains(pods, forged.Name) {
			t.Fatalf("the victim's Service %s lists %v: a Pod with a colliding name hash is behind it", victim, pods)
		}
	}

	// The switch: Unmanaged removes the Sandbox's NetworkPolicy.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s := &sandboxv1beta1.Sandbox{}
		if err := c.Get(ctx, vkey, s); err != nil {
			return err
		}
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[sandboxv1beta1.AnnotationNetworkPolicyManagement] = "Unmanaged"
		return c.Update(ctx, s)
	})
	if err != nil {
		t.Fatal(err)
	}
	// outOfPolicy reports an error while the namespace's policy selects
	// the Pod key.
	outOfPolicy := func(key types.NamespacedName) func() error {
		return func() error {
			p, cur := &corev1.Pod{}, &networkingv1.NetworkPolicy{}
			if err := errors.Join(c.Get(ctx, key, p), c.Get(ctx, npKey, cur)); err != nil {
				return err
			}
			if selects(t, cur, p) {
				return fmt.Errorf("Pod %s (labels %v) is under the namespace's policy", p.Name, p.Labels)
			}
			return nil
		}
	}
	waitFor(t, 30*time.Second, "the Unmanaged Sandbox's Pod out of the namespace's policy", outOfPolicy(vkey))

	byo := sandbox(ns, "byo", func(s *sandboxv1beta1.Sandbox) {
		s.Annotations = map[string]string{sandboxv1beta1.AnnotationNetworkPolicyManagement: "Unmanaged"}
	})
	if err := c.Create(ctx, byo); err != nil {
		t.Fatal(err)
	}
	bkey := types.NamespacedName{Namespace: ns, Name: "byo"}
	waitFor(t, 90*time.Second, "byo Ready", readyIs(c, bkey, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady))
	if err := errors.Join(gone(c, bkey, &networkingv1.NetworkPolicy{})(), outOfPolicy(bkey)()); err != nil {
		t.Errorf("a Sandbox made Unmanaged: %v", err)
	}
}
