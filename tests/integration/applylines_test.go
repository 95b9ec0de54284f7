package integration

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
)

// TestApplyBodiesByLineAreTheSameApply: an apply sent one member per line
// (ssa.ApplyBodiesByLine, as the controller sends them) makes the object a
// single-line apply makes, owned the same way, and re-applying either
// changes nothing: the API server reads one document from both.
func TestApplyBodiesByLineAreTheSameApply(t *testing.T) {
	ctx := ctxFor(t)
	ns := env.Namespace(t)
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(ssa.ApplyBodiesByLine)
	lined, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// Values a YAML reader could take for something else were they not
	// JSON strings: a colon and a comma, "yes", "08", a line break, "null".
	mk := func(name string) *sandboxac.SandboxApplyConfiguration {
		return sandboxac.Sandbox(name, ns).
			WithLabels(map[string]string{"app": "demo", "answer": "yes"}).
			WithAnnotations(map[string]string{"note": "a: b, c", "zero": "08", "multi": "one\ntwo", "none": "null"}).
			WithSpec(sandboxac.SandboxSpec().WithPodTemplate(podTemplate().WithSpec(corev1ac.PodSpec().WithContainers(
				corev1ac.Container().WithName("main").WithImage("registry.k8s.io/pause:3.10").
					WithArgs("--flag=on", "{not json}", "[1, 2]").
					WithEnv(corev1ac.EnvVar().WithName("EMPTY").WithValue("")).
					WithResources(corev1ac.ResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")})),
			))))
	}
	read := func(name string) *sandboxv1beta1.Sandbox {
		t.Helper()
		sb := &sandboxv1beta1.Sandbox{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sb); err != nil {
			t.Fatal(err)
		}
		return sb
	}
	for name, c := range map[string]client.Client{"single-line": env.Client, "by-line": lined} {
		if err := c.Apply(ctx, mk(name), client.FieldOwner(testManager)); err != nil {
			t.Fatalf("%s apply: %v", name, err)
		}
	}
	single, byLine := read("single-line"), read("by-line")
	if diff := cmp.Diff(single.Spec, byLine.Spec); diff != "" {
		t.Errorf("spec differs (-single line +by line):\n%s", diff)
	}
	if diff := cmp.Diff(single.Labels, byLine.Labels); diff != "" {
		t.Errorf("labels differ (-single line +by line):\n%s", diff)
	}
	if diff := cmp.Diff(single.Annotations, byLine.Annotations); diff != "" {
		t.Errorf("annotations differ (-single line +by line):\n%s", diff)
	}
	if byLine.Annotations["multi"] != "one\ntwo" || byLine.Labels["answer"] != "yes" || byLine.Annotations["zero"] != "08" {
		t.Errorf("values read as something else: labels %v, annotations %v", byLine.Labels, byLine.Annotations)
	}
	owned := func(sb *sandboxv1beta1.Sandbox) string {
		for _, e := range sb.ManagedFields {
			if e.Manager == testManager && e.Operation == "Apply" && e.FieldsV1 != nil {
				return string(e.FieldsV1.GetRawBytes())
			}
		}
		t.Fatalf("%s has no Apply entry of %s: %v", sb.Name, testManager, sb.ManagedFields)
		return ""
	}
	if a, b := owned(single), owned(byLine); a != b {
		t.Errorf("owned fields differ:\nsingle line %s\nby line     %s", a, b)
	}
	rv := byLine.ResourceVersion
	if err := lined.Apply(ctx, mk("by-line"), client.FieldOwner(testManager)); err != nil {
		t.Fatal(err)
	}
	if got := read("by-line").ResourceVersion; got != rv {
		t.Errorf("re-applying by line changed the object: resourceVersion %s -> %s", rv, got)
	}
}
