package render

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/managedfields/managedfieldstest"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/utils/ptr"

	"github.com/agentsandbox/reconciler/api/convert"
	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration"
)

// TestAdoptedIsWhatTheAdoptionMakes: the Sandbox the policies judge before a
// warm adoption is exactly what the adoption apply makes of the member, as
// the API server's field manager computes it (created by our manager, its
// ownership upgraded to an Apply entry, a label set by someone else), so a
// policy cannot be passed by checking something else, and the apply
// removes the pool's labels and reference.
func TestAdoptedIsWhatTheAdoptionMakes(t *testing.T) {
	member := &sandboxv1beta1.Sandbox{
		TypeMeta: metav1.TypeMeta{APIVersion: sandboxv1beta1.GroupVersion.String(), Kind: "Sandbox"},
		ObjectMeta: metav1.ObjectMeta{Name: "pool-bcdfg", Namespace: "ns", UID: "m-uid", ResourceVersion: "42",
			Labels: map[string]string{sandboxv1beta1.LabelWarmPoolSandbox: "abc", sandboxv1beta1.LabelSandboxTemplateHash: "t1",
				sandboxv1beta1.LabelCreatedBy: CreatedBy},
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "cm"},
				{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxWarmPool", Name: "pool", UID: "p-uid", Controller: ptr.To(true)},
			}},
		Spec: sandboxv1beta1.SandboxSpec{SandboxBlueprint: sandboxv1beta1.SandboxBlueprint{PodTemplate: sandboxv1beta1.PodTemplate{
			ObjectMeta: sandboxv1beta1.PodMetadata{Labels: map[string]string{"app": "agent"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}}},
	}
	resumeTemplate := &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns",
		Annotations: map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "15m", "other": "not copied"}}}
	for name, tc := range map[string]struct {
		extra    sandboxv1beta1.PodMetadata
		template *extv1beta1.SandboxTemplate
		claim    map[string]string
		podName  string
	}{
		"no metadata":      {},
		"metadata":         {extra: sandboxv1beta1.PodMetadata{Labels: map[string]string{"team": "a", "app": "override"}, Annotations: map[string]string{"note": "x"}}},
		"template gone":    {template: nil, claim: map[string]string{sandboxv1beta1.AnnotationResumeOnConnect: "true"}},
		"template opt-in":  {template: resumeTemplate},
		"claim overrides":  {template: resumeTemplate, claim: map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "0"}},
		"template without": {template: &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns"}}},
		"pod named":        {podName: "pool-bcdfg"},
	} {
		t.Run(name, func(t *testing.T) {
			claim := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "c-uid", Annotations: tc.claim},
				Spec: extv1beta1.SandboxClaimSpec{AdditionalPodMetadata: tc.extra}}
			const ours = "ctrl"
			fm := managedfieldstest.NewTestFieldManager(testTypeConverter(t), sandboxv1beta1.GroupVersion.WithKind("Sandbox"))
			mustManage(t, fm.Update(toUnstructured(t, member), ours)) // the create
			live := fromUnstructured(t, fm.Live())
			if err := csaupgrade.UpgradeManagedFields(live, sets.New(ours), ours); err != nil {
				t.Fatal(err)
			}
			mustManage(t, fm.Update(toUnstructured(t, live), ours)) // the upgrade patch: managedFields only
			labelled := fromUnstructured(t, fm.Live())
			labelled.Labels["keep"] = "me"
			if tc.podName != "" {
				labelled.Annotations = map[string]string{sandboxv1beta1.AnnotationPodName: tc.podName}
			}
			mustManage(t, fm.Update(toUnstructured(t, labelled), "someone-else"))
			before := fromUnstructured(t, fm.Live())
			before.ResourceVersion = "42"
			kept := before.DeepCopy()

			ac, err := Adoption(claim, tc.template, before, ours)
			if err != nil {
				t.Fatal(err)
			}
			if got := ptr.Deref(ac.ResourceVersion, ""); got != "42" {
				t.Errorf("the adoption carries resourceVersion %q, want the member's", got)
			}
			applied := &unstructured.Unstructured{}
			if err := convert.JSON(ac, &applied.Object); err != nil {
				t.Fatal(err)
			}
			mustManage(t, fm.Apply(applied, ours, true))
			want := fromUnstructured(t, fm.Live())
			want.ManagedFields, want.ResourceVersion = nil, ""
			member := before
			got := Adopted(claim, tc.template, member)
			got.ManagedFields, got.ResourceVersion = nil, ""
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Adopted differs from the adopted member (-apply +Adopted):\n%s", diff)
			}
			if !cmp.Equal(member, kept) {
				t.Error("Adopted changed the member it was given")
			}
			var tmplAnnotations map[string]string
			if tc.template != nil {
				tmplAnnotations = tc.template.Annotations
			}
			for k, v := range sandboxv1beta1.ResumeAnnotations(tmplAnnotations, tc.claim) {
				if got.Annotations[k] != v {
					t.Errorf("annotation %s = %q, want %q", k, got.Annotations[k], v)
				}
			}
			if _, ok := got.Annotations["other"]; ok {
				t.Error("a template annotation other than the resume ones was copied")
			}
		})
	}
}

// testTypeConverter is the Sandbox schema the API server's field manager
// works with, from the generated apply configurations.
func testTypeConverter(t *testing.T) managedfields.TypeConverter {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := sandboxv1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return applyconfiguration.NewTypeConverter(scheme)
}

func mustManage(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("field manager: %v", err)
	}
}

func toUnstructured(t *testing.T, sb *sandboxv1beta1.Sandbox) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := convert.JSON(sb, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func fromUnstructured(t *testing.T, o runtime.Object) *sandboxv1beta1.Sandbox {
	t.Helper()
	sb := &sandboxv1beta1.Sandbox{}
	if err := convert.JSON(o, sb); err != nil {
		t.Fatal(err)
	}
	return sb
}
