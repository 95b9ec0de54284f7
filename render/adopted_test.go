package render

import (
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// TestAdoptedIsWhatTheAdoptionPatchMakes: the Sandbox the policies judge
// before a warm adoption is exactly what the adoption patch makes of the
// member, so a policy cannot be passed by checking something else.
func TestAdoptedIsWhatTheAdoptionPatchMakes(t *testing.T) {
	member := &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "pool-bcdfg", Namespace: "ns", UID: "m-uid", ResourceVersion: "42",
			Labels: map[string]string{sandboxv1beta1.LabelWarmPoolSandbox: "abc", "keep": "me"},
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "cm"},
				{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxWarmPool", Name: "pool", UID: "p-uid", Controller: ptr.To(true)},
			}},
		Spec: sandboxv1beta1.SandboxSpec{SandboxBlueprint: sandboxv1beta1.SandboxBlueprint{PodTemplate: sandboxv1beta1.PodTemplate{
			ObjectMeta: sandboxv1beta1.PodMetadata{Labels: map[string]string{"app": "agent"}},
		}}},
	}
	resumeTemplate := &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns",
		Annotations: map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "15m", "other": "not copied"}}}
	for name, tc := range map[string]struct {
		extra    sandboxv1beta1.PodMetadata
		template *extv1beta1.SandboxTemplate
		claim    map[string]string
	}{
		"no metadata":      {},
		"metadata":         {extra: sandboxv1beta1.PodMetadata{Labels: map[string]string{"team": "a", "app": "override"}, Annotations: map[string]string{"note": "x"}}},
		"template gone":    {template: nil, claim: map[string]string{sandboxv1beta1.AnnotationResumeOnConnect: "true"}},
		"template opt-in":  {template: resumeTemplate},
		"claim overrides":  {template: resumeTemplate, claim: map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "0"}},
		"template without": {template: &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns"}}},
	} {
		t.Run(name, func(t *testing.T) {
			claim := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "c-uid", Annotations: tc.claim},
				Spec: extv1beta1.SandboxClaimSpec{AdditionalPodMetadata: tc.extra}}
			patch, err := Adoption(claim, tc.template, member)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := json.Marshal(member)
			if err != nil {
				t.Fatal(err)
			}
			patched, err := jsonpatch.MergePatch(doc, patch)
			if err != nil {
				t.Fatal(err)
			}
			want := &sandboxv1beta1.Sandbox{}
			if err := json.Unmarshal(patched, want); err != nil {
				t.Fatal(err)
			}
			got := Adopted(claim, tc.template, member)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Adopted differs from the patched member (-patch +Adopted):\n%s", diff)
			}
			if member.Labels[sandboxv1beta1.LabelWarmPoolSandbox] == "" || len(member.Annotations) > 0 {
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
