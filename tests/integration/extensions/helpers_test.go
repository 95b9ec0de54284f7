package extensions

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/agentsandbox/reconciler/tests/envtest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

const timeout = 45 * time.Second

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// eventually retries check until it returns nil or the timeout passes.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	envtest.Eventually(t, timeout, what, check)
}

func newTemplate(ns, name string, mutate ...func(*extv1beta1.SandboxTemplate)) *extv1beta1.SandboxTemplate {
	t := &extv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: extv1beta1.SandboxTemplateSpec{
			PodTemplate: sandboxv1beta1.PodTemplate{
				ObjectMeta: sandboxv1beta1.PodMetadata{Labels: map[string]string{"app": "agent"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "agent", Image: "agent:1", Env: []corev1.EnvVar{{Name: "MODE", Value: "sandbox"}},
				}}},
			},
		},
	}
	for _, m := range mutate {
		m(t)
	}
	return t
}

func newPool(ns, name, template string, replicas int32) *extv1beta1.SandboxWarmPool {
	return &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: extv1beta1.SandboxWarmPoolSpec{
			Replicas:    ptr.To(replicas),
			TemplateRef: extv1beta1.SandboxTemplateRef{Name: template},
		},
	}
}

func newClaim(ns, name, pool string, mutate ...func(*extv1beta1.SandboxClaim)) *extv1beta1.SandboxClaim {
	c := &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: pool}},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(ctxFor(t), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func get[O client.Object](t *testing.T, ns, name string, o O) (O, error) {
	t.Helper()
	err := env.Client.Get(ctxFor(t), types.NamespacedName{Namespace: ns, Name: name}, o)
	return o, err
}

// change updates an object with retries on conflict, as a careful user does.
func change[O client.Object](t *testing.T, ns, name string, o O, mutate func(O)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctxFor(t), types.NamespacedName{Namespace: ns, Name: name}, o); err != nil {
			return err
		}
		mutate(o)
		return env.Client.Update(ctxFor(t), o)
	})
	if err != nil {
		t.Fatalf("updating %s: %v", name, err)
	}
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// waitClaim waits until the claim's Ready condition has status and reason.
func waitClaim(t *testing.T, ns, name string, status metav1.ConditionStatus, reason string) *extv1beta1.SandboxClaim {
	t.Helper()
	var c *extv1beta1.SandboxClaim
	eventually(t, fmt.Sprintf("claim %s Ready=%s/%s", name, status, reason), func() error {
		var err error
		if c, err = get(t, ns, name, &extv1beta1.SandboxClaim{}); err != nil {
			return err
		}
		r := findCondition(c.Status.Conditions, extv1beta1.ConditionReady)
		if r == nil || r.Status != status || (reason != "" && r.Reason != reason) {
			return fmt.Errorf("Ready is %+v", r)
		}
		return nil
	})
	return c
}

// sandboxes lists the namespace's Sandboxes (not being deleted) controlled
// by the pool or claim with the given UID (the reference names our API
// group and one of those kinds: a copied UID under another group is not
// the owner), sorted by name.
func sandboxes(t *testing.T, ns string, owner types.UID) []sandboxv1beta1.Sandbox {
	t.Helper()
	var list sandboxv1beta1.SandboxList
	if err := env.Client.List(ctxFor(t), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []sandboxv1beta1.Sandbox
	for _, sb := range list.Items {
		if sb.DeletionTimestamp != nil {
			continue
		}
		if ref := metav1.GetControllerOf(&sb); ref != nil && ref.UID == owner &&
			(sandboxv1beta1.RefersTo(*ref, extv1beta1.WarmPoolKind) || sandboxv1beta1.RefersTo(*ref, extv1beta1.ClaimKind)) {
			out = append(out, sb)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func ready(sb *sandboxv1beta1.Sandbox) bool {
	c := findCondition(sb.Status.Conditions, sandboxv1beta1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue
}

// waitPool waits until the pool has want members, all Ready, and reports it.
func waitPool(t *testing.T, ns, name string, want int) (*extv1beta1.SandboxWarmPool, []sandboxv1beta1.Sandbox) {
	t.Helper()
	var pool *extv1beta1.SandboxWarmPool
	var members []sandboxv1beta1.Sandbox
	eventually(t, fmt.Sprintf("pool %s with %d Ready members", name, want), func() error {
		var err error
		if pool, err = get(t, ns, name, &extv1beta1.SandboxWarmPool{}); err != nil {
			return err
		}
		members = sandboxes(t, ns, pool.UID)
		n := 0
		for i := range members {
			if ready(&members[i]) {
				n++
			}
		}
		if len(members) != want || n != want {
			return fmt.Errorf("%d members, %d Ready", len(members), n)
		}
		if pool.Status.ReadyReplicas != int32(want) || pool.Status.Replicas != int32(want) {
			return fmt.Errorf("status replicas %d, ready %d", pool.Status.Replicas, pool.Status.ReadyReplicas)
		}
		return nil
	})
	return pool, members
}

func names(list []sandboxv1beta1.Sandbox) []string {
	out := make([]string, 0, len(list))
	for _, sb := range list {
		out = append(out, sb.Name)
	}
	return out
}

func intstrPort(p int32) intstr.IntOrString { return intstr.FromInt32(p) }

// finishedJob makes a namespace with a cold claim "job" that has the given
// TTL after finishing and shutdown policy, waits for it to be Ready, and
// completes its workload (the Pod succeeds). It returns the namespace.
func finishedJob(t *testing.T, ttl int32, policy extv1beta1.ShutdownPolicy) string {
	t.Helper()
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 0))
	create(t, newClaim(ns, "job", "pool", func(c *extv1beta1.SandboxClaim) {
		c.Spec.Lifecycle = &extv1beta1.Lifecycle{TTLSecondsAfterFinished: ptr.To(ttl), ShutdownPolicy: policy}
	}))
	waitClaim(t, ns, "job", metav1.ConditionTrue, "")
	pod, err := get(t, ns, "job", &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodSucceeded
	if err := env.Client.Status().Update(ctxFor(t), pod); err != nil {
		t.Fatal(err)
	}
	return ns
}
