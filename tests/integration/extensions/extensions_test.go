package extensions

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

func TestTemplateNetworkPolicy(t *testing.T) {
	ns := env.Namespace(t)
	create(t, newTemplate(ns, "tpl"))
	npName := render.NetworkPolicyName("tpl")
	hash := render.NameHash("tpl")

	var np *networkingv1.NetworkPolicy
	eventually(t, "secure default NetworkPolicy", func() error {
		var err error
		np, err = get(t, ns, npName, &networkingv1.NetworkPolicy{})
		return err
	})
	if got := np.Spec.PodSelector.MatchLabels[sandboxv1beta1.LabelSandboxTemplateRefHash]; got != hash {
		t.Errorf("pod selector %v, want the template-ref hash %s", np.Spec.PodSelector.MatchLabels, hash)
	}
	if len(np.Spec.PolicyTypes) != 2 || len(np.Spec.Ingress) != 1 || len(np.Spec.Egress) != 2 {
		t.Errorf("policy types %v, %d ingress and %d egress rules; want both types, 1 and 2", np.Spec.PolicyTypes, len(np.Spec.Ingress), len(np.Spec.Egress))
	}
	if ref := metav1.GetControllerOf(np); ref == nil || ref.Kind != "SandboxTemplate" || ref.Name != "tpl" {
		t.Errorf("controller of the policy is %+v", ref)
	}
	eventually(t, "template labeled with its ref hash", func() error {
		tmpl, err := get(t, ns, "tpl", &extv1beta1.SandboxTemplate{})
		if err != nil {
			return err
		}
		if tmpl.Labels[sandboxv1beta1.LabelSandboxTemplateRefHash] != hash {
			return fmt.Errorf("labels %v", tmpl.Labels)
		}
		return nil
	})

	change(t, ns, "tpl", &extv1beta1.SandboxTemplate{}, func(tmpl *extv1beta1.SandboxTemplate) {
		tmpl.Spec.NetworkPolicyManagement = extv1beta1.NetworkPolicyManagementUnmanaged
	})
	eventually(t, "policy removed under Unmanaged", func() error {
		if _, err := get(t, ns, npName, &networkingv1.NetworkPolicy{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("policy still there (%w)", err)
		}
		return nil
	})

	port := intstrPort(8888)
	change(t, ns, "tpl", &extv1beta1.SandboxTemplate{}, func(tmpl *extv1beta1.SandboxTemplate) {
		tmpl.Spec.NetworkPolicyManagement = extv1beta1.NetworkPolicyManagementManaged
		tmpl.Spec.NetworkPolicy = &extv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
		}}}
	})
	eventually(t, "custom policy", func() error {
		np, err := get(t, ns, npName, &networkingv1.NetworkPolicy{})
		if err != nil {
			return err
		}
		if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 || len(np.Spec.Egress) != 0 {
			return fmt.Errorf("spec %+v", np.Spec)
		}
		return nil
	})
}

func TestWarmPoolFillsScalesAndReports(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 3))

	pool, members := waitPool(t, ns, "pool", 3)
	if pool.Status.Selector != render.PoolSelector("pool") {
		t.Errorf("status.selector %q, want %q", pool.Status.Selector, render.PoolSelector("pool"))
	}
	if c := findCondition(pool.Status.Conditions, extv1beta1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("pool Ready condition %+v", c)
	}
	for _, m := range members {
		if !strings.HasPrefix(m.Name, "pool-") {
			t.Errorf("member %s is not named <pool>-<suffix>", m.Name)
		}
		if m.Spec.PodTemplate.Spec.AutomountServiceAccountToken == nil || *m.Spec.PodTemplate.Spec.AutomountServiceAccountToken {
			t.Errorf("member %s: automountServiceAccountToken not defaulted to false", m.Name)
		}
		pod, err := get(t, ns, m.Name, &corev1.Pod{})
		if err != nil {
			t.Fatalf("pod of %s: %v", m.Name, err)
		}
		if pod.Labels[sandboxv1beta1.LabelSandboxTemplateRefHash] != render.NameHash("tpl") {
			t.Errorf("pod %s lacks the template-ref hash its NetworkPolicy selects: %v", pod.Name, pod.Labels)
		}
	}

	// kubectl scale goes through the scale subresource.
	scale := func(n int32) {
		t.Helper()
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n))
		if err := env.Client.SubResource("scale").Patch(ctxFor(t), &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"}}, patch); err != nil {
			t.Fatalf("scaling: %v", err)
		}
	}
	scale(1)
	_, after := waitPool(t, ns, "pool", 1)
	if !slices.Contains(names(members), after[0].Name) {
		t.Errorf("scaling down replaced members: had %v, now %v", names(members), names(after))
	}
	scale(4)
	waitPool(t, ns, "pool", 4)
}

func TestWarmPoolExcessGoesUnreadyFirst(t *testing.T) {
	ns := env.Namespace(t)
	kubelet := env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 2))
	_, ready := waitPool(t, ns, "pool", 2)

	kubelet.Hold.Store(true)
	change(t, ns, "pool", &extv1beta1.SandboxWarmPool{}, func(p *extv1beta1.SandboxWarmPool) { p.Spec.Replicas = ptr.To[int32](4) })
	pool, _ := get(t, ns, "pool", &extv1beta1.SandboxWarmPool{})
	eventually(t, "4 members, 2 of them pending", func() error {
		if n := len(sandboxes(t, ns, pool.UID)); n != 4 {
			return fmt.Errorf("%d members", n)
		}
		return nil
	})
	change(t, ns, "pool", &extv1beta1.SandboxWarmPool{}, func(p *extv1beta1.SandboxWarmPool) { p.Spec.Replicas = ptr.To[int32](2) })
	eventually(t, "the not-ready members removed", func() error {
		got := names(sandboxes(t, ns, pool.UID))
		if !slices.Equal(got, names(ready)) {
			return fmt.Errorf("members %v, want the Ready ones %v", got, names(ready))
		}
		return nil
	})
}

func TestWarmPoolUpdateStrategies(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	replenish := newPool(ns, "keep", "tpl", 2)
	recreate := newPool(ns, "fresh", "tpl", 2)
	recreate.Spec.UpdateStrategy = &extv1beta1.UpdateStrategy{Type: extv1beta1.UpdateStrategyRecreate}
	create(t, newTemplate(ns, "tpl"), replenish, recreate)
	_, keepBefore := waitPool(t, ns, "keep", 2)
	_, freshBefore := waitPool(t, ns, "fresh", 2)

	// A metadata-only edit makes no member stale.
	change(t, ns, "tpl", &extv1beta1.SandboxTemplate{}, func(tmpl *extv1beta1.SandboxTemplate) {
		tmpl.Spec.PodTemplate.ObjectMeta.Labels["team"] = "platform"
	})
	time.Sleep(2 * time.Second)
	if _, m := waitPool(t, ns, "fresh", 2); !slices.Equal(names(m), names(freshBefore)) {
		t.Fatalf("a metadata-only template edit replaced Recreate members: %v -> %v", names(freshBefore), names(m))
	}

	change(t, ns, "tpl", &extv1beta1.SandboxTemplate{}, func(tmpl *extv1beta1.SandboxTemplate) {
		tmpl.Spec.PodTemplate.Spec.Containers[0].Image = "agent:2"
	})
	eventually(t, "Recreate replaces stale members", func() error {
		_, m := waitPool(t, ns, "fresh", 2)
		for _, sb := range m {
			if slices.Contains(names(freshBefore), sb.Name) || sb.Spec.PodTemplate.Spec.Containers[0].Image != "agent:2" {
				return fmt.Errorf("member %s is stale", sb.Name)
			}
		}
		return nil
	})
	if _, m := waitPool(t, ns, "keep", 2); !slices.Equal(names(m), names(keepBefore)) {
		t.Errorf("OnReplenish replaced members: %v -> %v", names(keepBefore), names(m))
	}
}

func TestClaimTakesWarmMemberAndPoolReplenishes(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 2))
	pool, members := waitPool(t, ns, "pool", 2)

	start := time.Now()
	create(t, newClaim(ns, "claim", "pool", func(c *extv1beta1.SandboxClaim) {
		c.Spec.AdditionalPodMetadata = sandboxv1beta1.PodMetadata{Labels: map[string]string{"user": "alice"}, Annotations: map[string]string{"session": "s1"}}
	}))
	claim := waitClaim(t, ns, "claim", metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady)
	t.Logf("claim Ready %s after creation (as observed by polling)", time.Since(start).Round(time.Millisecond))

	name := claim.Status.Sandbox.Name
	if !slices.Contains(names(members), name) {
		t.Fatalf("claim bound to %q, not one of the warm members %v", name, names(members))
	}
	if len(claim.Status.Sandbox.PodIPs) == 0 {
		t.Error("claim status has no pod IPs")
	}
	sb, err := get(t, ns, name, &sandboxv1beta1.Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(sb); ref == nil || ref.UID != claim.UID {
		t.Errorf("adopted Sandbox's controller is %+v, want the claim", ref)
	}
	if len(sb.OwnerReferences) != 1 {
		t.Errorf("adopted Sandbox has owners %+v, want the claim only", sb.OwnerReferences)
	}
	if sb.Labels[sandboxv1beta1.LabelClaimUID] != string(claim.UID) || sb.Labels[sandboxv1beta1.LabelLaunchType] != sandboxv1beta1.LaunchTypeWarm {
		t.Errorf("adopted Sandbox labels %v", sb.Labels)
	}
	if _, ok := sb.Labels[sandboxv1beta1.LabelWarmPoolSandbox]; ok {
		t.Errorf("adopted Sandbox still carries the pool label: %v", sb.Labels)
	}
	if sb.Spec.PodTemplate.ObjectMeta.Labels["user"] != "alice" || sb.Spec.PodTemplate.ObjectMeta.Annotations["session"] != "s1" {
		t.Errorf("additionalPodMetadata not propagated: %+v", sb.Spec.PodTemplate.ObjectMeta)
	}
	eventually(t, "pod gets the claim's metadata", func() error {
		pod, err := get(t, ns, name, &corev1.Pod{})
		if err != nil {
			return err
		}
		if pod.Labels["user"] != "alice" || pod.Annotations["session"] != "s1" {
			return fmt.Errorf("pod labels %v annotations %v", pod.Labels, pod.Annotations)
		}
		return nil
	})
	// As upstream: the annotations are there no later than the status that
	// reports the claim Ready (the claim read above is the first seen Ready).
	if claim.Annotations[extv1beta1.AnnotationSandboxName] != name {
		t.Errorf("claim Ready without the sandbox-name annotation: %v", claim.Annotations)
	}
	if at, err := time.Parse(time.RFC3339Nano, claim.Annotations[extv1beta1.AnnotationControllerFirstObservedAt]); err != nil || at.After(time.Now()) {
		t.Errorf("controller-first-observed-at %q: %v", claim.Annotations[extv1beta1.AnnotationControllerFirstObservedAt], err)
	}
	if _, err := time.Parse(time.RFC3339Nano, claim.Annotations[extv1beta1.AnnotationClaimFirstReadyAt]); err != nil {
		t.Errorf("claim-first-ready-at %q: %v", claim.Annotations[extv1beta1.AnnotationClaimFirstReadyAt], err)
	}

	_, refilled := waitPool(t, ns, "pool", 2)
	if slices.Contains(names(refilled), name) {
		t.Errorf("the claimed Sandbox is still counted in the pool: %v", names(refilled))
	}
	_ = pool
}

func TestClaimColdStartsWhenPoolIsEmpty(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 0), newClaim(ns, "claim", "pool"))
	claim := waitClaim(t, ns, "claim", metav1.ConditionTrue, "")
	if claim.Status.Sandbox.Name != "claim" {
		t.Fatalf("cold Sandbox is %q, want it named after the claim", claim.Status.Sandbox.Name)
	}
	sb, err := get(t, ns, "claim", &sandboxv1beta1.Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Labels[sandboxv1beta1.LabelLaunchType] != sandboxv1beta1.LaunchTypeCold || sb.Labels[sandboxv1beta1.LabelClaimUID] != string(claim.UID) {
		t.Errorf("cold Sandbox labels %v", sb.Labels)
	}
	if sb.Annotations[sandboxv1beta1.AnnotationSandboxTemplateRef] != "tpl" {
		t.Errorf("cold Sandbox annotations %v", sb.Annotations)
	}
}

func TestClaimInjectionPolicies(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 1))
	waitPool(t, ns, "pool", 1)

	withEnv := func(c *extv1beta1.SandboxClaim) {
		c.Spec.Env = []extv1beta1.EnvVar{{Name: "API_KEY_REF", Value: "vault:abc"}}
	}
	create(t, newClaim(ns, "env", "pool", withEnv))
	c := waitClaim(t, ns, "env", metav1.ConditionFalse, extv1beta1.ReasonEnvVarsInjectionRejected)
	if msg := findCondition(c.Status.Conditions, extv1beta1.ConditionReady).Message; msg != "environment variable injection rejected: environment variable injection is not allowed by the template policy" {
		t.Errorf("EnvVarsInjectionRejected message %q, want upstream's", msg)
	}
	if _, err := get(t, ns, "env", &sandboxv1beta1.Sandbox{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused claim got a Sandbox (%v)", err)
	}

	create(t, newClaim(ns, "vct", "pool", func(c *extv1beta1.SandboxClaim) {
		c.Spec.VolumeClaimTemplates = []sandboxv1beta1.PersistentVolumeClaimTemplate{{
			EmbeddedObjectMetadata: sandboxv1beta1.EmbeddedObjectMetadata{Name: "scratch"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}}
	}))
	c = waitClaim(t, ns, "vct", metav1.ConditionFalse, extv1beta1.ReasonVolumeClaimTemplatesError)
	if msg := findCondition(c.Status.Conditions, extv1beta1.ConditionReady).Message; msg != "failed to merge volume claim templates: volume claim templates are disallowed by the template" {
		t.Errorf("VolumeClaimTemplatesError message %q, want upstream's", msg)
	}

	create(t, newClaim(ns, "meta", "pool", func(c *extv1beta1.SandboxClaim) {
		c.Spec.AdditionalPodMetadata.Labels = map[string]string{sandboxv1beta1.LabelClaimUID: "forged"}
	}))
	c = waitClaim(t, ns, "meta", metav1.ConditionFalse, extv1beta1.ReasonInvalidMetadata)
	if msg := findCondition(c.Status.Conditions, extv1beta1.ConditionReady).Message; msg != `invalid additionalPodMetadata: failed to validate label "agents.x-k8s.io/claim-uid": restricted system domain: "agents.x-k8s.io" is not allowed in AdditionalPodMetadata` {
		t.Errorf("InvalidMetadata message %q, want upstream's", msg)
	}

	// Allowing injection on the template lets the waiting claim through,
	// cold, with the variable in the first container.
	change(t, ns, "tpl", &extv1beta1.SandboxTemplate{}, func(tmpl *extv1beta1.SandboxTemplate) {
		tmpl.Spec.EnvVarsInjectionPolicy = extv1beta1.InjectionPolicyAllowed
	})
	claim := waitClaim(t, ns, "env", metav1.ConditionTrue, "")
	sb, err := get(t, ns, claim.Status.Sandbox.Name, &sandboxv1beta1.Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Name != "env" || sb.Labels[sandboxv1beta1.LabelLaunchType] != sandboxv1beta1.LaunchTypeCold {
		t.Errorf("claim with env bound to %s (%v), want a cold Sandbox named after it", sb.Name, sb.Labels)
	}
	env0 := sb.Spec.PodTemplate.Spec.Containers[0].Env
	if !slices.Contains(env0, corev1.EnvVar{Name: "API_KEY_REF", Value: "vault:abc"}) || !slices.Contains(env0, corev1.EnvVar{Name: "MODE", Value: "sandbox"}) {
		t.Errorf("container env %v", env0)
	}
}

func TestClaimWaitsForPoolAndTemplate(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newClaim(ns, "claim", "pool"))
	c := waitClaim(t, ns, "claim", metav1.ConditionFalse, extv1beta1.ReasonWarmPoolNotFound)
	if msg := findCondition(c.Status.Conditions, extv1beta1.ConditionReady).Message; msg != `SandboxWarmPool "pool" not found` {
		t.Errorf("WarmPoolNotFound message %q, want upstream's", msg)
	}
	if _, err := time.Parse(time.RFC3339Nano, c.Annotations[extv1beta1.AnnotationControllerFirstObservedAt]); err != nil {
		t.Errorf("a claim waiting for its pool lacks controller-first-observed-at: %v", c.Annotations)
	}
	create(t, newPool(ns, "pool", "tpl", 1))
	c = waitClaim(t, ns, "claim", metav1.ConditionFalse, extv1beta1.ReasonTemplateNotFound)
	if msg := findCondition(c.Status.Conditions, extv1beta1.ConditionReady).Message; msg != `SandboxTemplate "tpl" not found` {
		t.Errorf("TemplateNotFound message %q, want upstream's", msg)
	}
	create(t, newTemplate(ns, "tpl"))
	claim := waitClaim(t, ns, "claim", metav1.ConditionTrue, "")
	if claim.Status.Sandbox.Name == "" {
		t.Error("Ready claim names no Sandbox")
	}
	eventually(t, "cold claim gets claim-first-ready-at", func() error {
		c, err := get(t, ns, "claim", &extv1beta1.SandboxClaim{})
		if err != nil {
			return err
		}
		if _, err := time.Parse(time.RFC3339Nano, c.Annotations[extv1beta1.AnnotationClaimFirstReadyAt]); err != nil {
			return fmt.Errorf("annotations %v", c.Annotations)
		}
		return nil
	})
}

func TestTemplateDeletedUnderLivePool(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 2))
	_, members := waitPool(t, ns, "pool", 2)
	if err := env.Client.Delete(ctxFor(t), &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tpl"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pool reports the missing template", func() error {
		p, err := get(t, ns, "pool", &extv1beta1.SandboxWarmPool{})
		if err != nil {
			return err
		}
		if c := findCondition(p.Status.Conditions, extv1beta1.ConditionReady); c == nil || c.Reason != extv1beta1.ReasonTemplateNotFound {
			return fmt.Errorf("Ready is %+v", c)
		}
		return nil
	})
	change(t, ns, "pool", &extv1beta1.SandboxWarmPool{}, func(p *extv1beta1.SandboxWarmPool) { p.Spec.Replicas = ptr.To[int32](3) })
	time.Sleep(time.Second)
	pool, _ := get(t, ns, "pool", &extv1beta1.SandboxWarmPool{})
	if got := names(sandboxes(t, ns, pool.UID)); !slices.Equal(got, names(members)) {
		t.Fatalf("members changed without a template: %v -> %v", names(members), got)
	}
	// Warm members still serve claims.
	create(t, newClaim(ns, "claim", "pool"))
	claim := waitClaim(t, ns, "claim", metav1.ConditionTrue, "")
	if !slices.Contains(names(members), claim.Status.Sandbox.Name) {
		t.Errorf("claim bound to %s, want a warm member", claim.Status.Sandbox.Name)
	}
	create(t, newClaim(ns, "claim2", "pool"), newClaim(ns, "claim3", "pool"))
	waitClaim(t, ns, "claim3", metav1.ConditionFalse, "")
	eventually(t, "the claim past the warm members reports the template", func() error {
		var reasons []string
		for _, n := range []string{"claim2", "claim3"} {
			c, _ := get(t, ns, n, &extv1beta1.SandboxClaim{})
			if r := findCondition(c.Status.Conditions, extv1beta1.ConditionReady); r != nil {
				reasons = append(reasons, r.Reason)
			}
		}
		if !slices.Contains(reasons, extv1beta1.ReasonTemplateNotFound) {
			return fmt.Errorf("reasons %v", reasons)
		}
		return nil
	})
}

// checkBindings asserts the claim invariants: every claim is bound to
// exactly one Sandbox it controls, and no Sandbox serves two claims.
func checkBindings(t *testing.T, ns string, claims []string) map[string]int {
	t.Helper()
	byLaunch := map[string]int{}
	seen := map[string]string{}
	for _, n := range claims {
		c, err := get(t, ns, n, &extv1beta1.SandboxClaim{})
		if err != nil {
			t.Fatal(err)
		}
		name := c.Status.Sandbox.Name
		if name == "" {
			t.Errorf("claim %s is not bound", n)
			continue
		}
		if other, dup := seen[name]; dup {
			t.Errorf("Sandbox %s is bound to claims %s and %s", name, other, n)
		}
		seen[name] = n
		owned := sandboxes(t, ns, c.UID)
		if len(owned) != 1 || owned[0].Name != name {
			t.Errorf("claim %s controls %v, want exactly [%s]", n, names(owned), name)
			continue
		}
		byLaunch[owned[0].Labels[sandboxv1beta1.LabelLaunchType]]++
	}
	return byLaunch
}

func TestFiftyClaimsRaceForTenMembers(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 10))
	waitPool(t, ns, "pool", 10)

	var claims []string
	start := time.Now()
	for i := range 50 {
		n := fmt.Sprintf("c%02d", i)
		claims = append(claims, n)
		create(t, newClaim(ns, n, "pool"))
	}
	for _, n := range claims {
		waitClaim(t, ns, n, metav1.ConditionTrue, "")
	}
	t.Logf("50 claims Ready in %s", time.Since(start).Round(time.Millisecond))
	byLaunch := checkBindings(t, ns, claims)
	if byLaunch[sandboxv1beta1.LaunchTypeWarm] < 10 || byLaunch[sandboxv1beta1.LaunchTypeWarm]+byLaunch[sandboxv1beta1.LaunchTypeCold] != 50 {
		t.Errorf("launch types %v: want at least the 10 warm members taken and the rest cold", byLaunch)
	}
	waitPool(t, ns, "pool", 10)
}

func TestClaimExpiry(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 0))
	soon := metav1.NewTime(time.Now().Add(3 * time.Second))
	lifecycle := func(policy extv1beta1.ShutdownPolicy) func(*extv1beta1.SandboxClaim) {
		return func(c *extv1beta1.SandboxClaim) {
			c.Spec.Lifecycle = &extv1beta1.Lifecycle{ShutdownTime: &soon, ShutdownPolicy: policy}
		}
	}
	create(t,
		newClaim(ns, "retain", "pool", lifecycle(extv1beta1.ShutdownPolicyRetain)),
		newClaim(ns, "delete", "pool", lifecycle(extv1beta1.ShutdownPolicyDelete)),
		newClaim(ns, "foreground", "pool", lifecycle(extv1beta1.ShutdownPolicyDeleteForeground)),
	)
	waitClaim(t, ns, "retain", metav1.ConditionTrue, "")

	c := waitClaim(t, ns, "retain", metav1.ConditionFalse, extv1beta1.ReasonClaimExpired)
	if msg := findCondition(c.Status.Conditions, extv1beta1.ConditionReady).Message; msg != "Claim expired. Sandbox cleanup initiated." {
		t.Errorf("expired claim's Ready message %q, want upstream's", msg)
	}
	eventually(t, "Retain deletes the Sandbox, keeps the claim", func() error {
		if _, err := get(t, ns, "retain", &sandboxv1beta1.Sandbox{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("sandbox still there (%w)", err)
		}
		return nil
	})
	// status.sandbox is reported until the Sandbox is gone, then cleared.
	eventually(t, "expired Retain claim names no Sandbox once it is gone", func() error {
		c, err := get(t, ns, "retain", &extv1beta1.SandboxClaim{})
		if err != nil {
			return err
		}
		if c.Status.Sandbox.Name != "" {
			return fmt.Errorf("still names Sandbox %s", c.Status.Sandbox.Name)
		}
		return nil
	})
	eventually(t, "Delete deletes the claim", func() error {
		if _, err := get(t, ns, "delete", &extv1beta1.SandboxClaim{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("claim still there (%w)", err)
		}
		return nil
	})
	// envtest has no garbage collector: a foreground deletion waits on it
	// with the foregroundDeletion finalizer, which is what we check here.
	eventually(t, "DeleteForeground deletes the claim in the foreground", func() error {
		c, err := get(t, ns, "foreground", &extv1beta1.SandboxClaim{})
		if err != nil {
			return err
		}
		if c.DeletionTimestamp == nil || !slices.Contains(c.Finalizers, metav1.FinalizerDeleteDependents) {
			return fmt.Errorf("deletionTimestamp %v, finalizers %v", c.DeletionTimestamp, c.Finalizers)
		}
		return nil
	})
	if _, err := get(t, ns, "retain", &extv1beta1.SandboxClaim{}); err != nil {
		t.Errorf("Retain claim: %v", err)
	}
}

func TestClaimTTLAfterFinished(t *testing.T) {
	ns := finishedJob(t, 2, extv1beta1.ShutdownPolicyDelete)
	eventually(t, "Finished mirrored on the claim", func() error {
		c, err := get(t, ns, "job", &extv1beta1.SandboxClaim{})
		if err != nil {
			return err
		}
		if f := findCondition(c.Status.Conditions, extv1beta1.ConditionFinished); f == nil || f.Status != metav1.ConditionTrue {
			return fmt.Errorf("Finished is %+v", f)
		}
		return nil
	})
	eventually(t, "claim deleted after the TTL", func() error {
		if _, err := get(t, ns, "job", &extv1beta1.SandboxClaim{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("claim still there (%w)", err)
		}
		return nil
	})
}

// TestV1alpha1ClaimSaysWhichPoolToCreate: a claim converted from v1alpha1
// (annotations as the conversion writes them) whose shadow pool does not
// exist tells the user what to create.
func TestV1alpha1ClaimSaysWhichPoolToCreate(t *testing.T) {
	ns := env.Namespace(t)
	create(t, newClaim(ns, "legacy", "shadow-pool-python", func(c *extv1beta1.SandboxClaim) {
		c.Annotations = map[string]string{"api.agents.x-k8s.io/sandbox-template-ref": "python", "api.agents.x-k8s.io/warmpool": "default"}
	}))
	c := waitClaim(t, ns, "legacy", metav1.ConditionFalse, extv1beta1.ReasonWarmPoolNotFound)
	msg := findCondition(c.Status.Conditions, extv1beta1.ConditionReady).Message
	for _, want := range []string{"written as v1alpha1", "SandboxWarmPool shadow-pool-python", `spec.sandboxTemplateRef.name "python"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}

// TestClaimNotOwnedSandbox: a Sandbox named like the claim that the claim
// does not control is reported in upstream's words, and once the claim
// expires its deletion is skipped, also in upstream's words.
func TestClaimNotOwnedSandbox(t *testing.T) {
	ns := env.Namespace(t)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 0))
	foreign := &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"},
		Spec: sandboxv1beta1.SandboxSpec{SandboxBlueprint: sandboxv1beta1.SandboxBlueprint{
			PodTemplate: sandboxv1beta1.PodTemplate{Spec: corev1.PodSpec{
				RuntimeClassName: newTemplate(ns, "x").Spec.PodTemplate.Spec.RuntimeClassName,
				Containers:       []corev1.Container{{Name: "c", Image: "busybox"}},
			}},
		}},
	}
	create(t, foreign)
	soon := metav1.NewTime(time.Now().Add(3 * time.Second))
	create(t, newClaim(ns, "mine", "pool", func(c *extv1beta1.SandboxClaim) {
		c.Spec.Lifecycle = &extv1beta1.Lifecycle{ShutdownTime: &soon, ShutdownPolicy: extv1beta1.ShutdownPolicyRetain}
	}))
	c := waitClaim(t, ns, "mine", metav1.ConditionFalse, extv1beta1.ReasonReconcilerError)
	if msg := findCondition(c.Status.Conditions, extv1beta1.ConditionReady).Message; msg != `Error seen: sandbox "mine" is not controlled by claim "mine". Please use a different claim name or delete the sandbox manually` {
		t.Errorf("message %q, want upstream's", msg)
	}
	c = waitClaim(t, ns, "mine", metav1.ConditionFalse, extv1beta1.ReasonClaimExpired)
	if msg := findCondition(c.Status.Conditions, extv1beta1.ConditionReady).Message; msg != `Claim expired. sandbox not owned by this claim: sandbox "mine" is not owned by claim "mine"; deletion skipped.` {
		t.Errorf("expired message %q, want upstream's", msg)
	}
	if c.Status.Sandbox.Name != "" {
		t.Errorf("status.sandbox names %q", c.Status.Sandbox.Name)
	}
	if _, err := get(t, ns, "mine", &sandboxv1beta1.Sandbox{}); err != nil {
		t.Errorf("the foreign Sandbox: %v", err)
	}
}
