package extensions

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// The resume opt-in of a template and a claim reaches the Sandbox the
// claim gets, warm or cold, the claim's value winning; warm members
// waiting in the pool carry none of it (they are never suspended idle).
func TestClaimSandboxesCarryTheResumeOptIn(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl", func(tp *extv1beta1.SandboxTemplate) {
		tp.Annotations = map[string]string{
			sandboxv1beta1.AnnotationIdleTimeout:     "15m",
			sandboxv1beta1.AnnotationResumeOnConnect: "true",
		}
		tp.Spec.EnvVarsInjectionPolicy = extv1beta1.InjectionPolicyAllowed
	}), newPool(ns, "pool", "tpl", 2))
	_, members := waitPool(t, ns, "pool", 2)
	for _, m := range members {
		for _, k := range []string{sandboxv1beta1.AnnotationIdleTimeout, sandboxv1beta1.AnnotationResumeOnConnect} {
			if v, ok := m.Annotations[k]; ok {
				t.Errorf("warm member %s carries %s=%q", m.Name, k, v)
			}
		}
	}

	overriding := func(c *extv1beta1.SandboxClaim) {
		c.Annotations = map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "1h"}
	}
	create(t, newClaim(ns, "warm", "pool", overriding))
	warm := waitClaim(t, ns, "warm", metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady)
	// A claim with env cold-starts.
	create(t, newClaim(ns, "cold", "pool", overriding, func(c *extv1beta1.SandboxClaim) {
		c.Spec.Env = []extv1beta1.EnvVar{{Name: "TASK", Value: "x"}}
	}))
	cold := waitClaim(t, ns, "cold", metav1.ConditionTrue, "")

	want := map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "1h", sandboxv1beta1.AnnotationResumeOnConnect: "true"}
	for launch, name := range map[string]string{"warm": warm.Status.Sandbox.Name, "cold": cold.Status.Sandbox.Name} {
		sb, err := get(t, ns, name, &sandboxv1beta1.Sandbox{})
		if err != nil {
			t.Fatal(err)
		}
		if sb.Labels[sandboxv1beta1.LabelLaunchType] != launch {
			t.Errorf("%s: launch type %q", name, sb.Labels[sandboxv1beta1.LabelLaunchType])
		}
		for k, v := range want {
			if sb.Annotations[k] != v {
				t.Errorf("%s Sandbox %s: %s=%q, want %q", launch, name, k, sb.Annotations[k], v)
			}
		}
	}
}
