package v1alpha1

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
)

func same(t *testing.T, what string, a, b any) {
	t.Helper()
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	if string(x) != string(y) {
		t.Errorf("%s: round trip changed the object:\n%s\n%s", what, x, y)
	}
}

func TestClaimConversion(t *testing.T) {
	cases := []struct {
		warmpool, template, wantPool string
	}{
		{"default", "python", "shadow-pool-python"},
		{"none", "python", "shadow-pool-python"},
		{"", "python", "shadow-pool-python"},
		{"fast-pool", "python", "fast-pool"},
	}
	for _, tc := range cases {
		in := &SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: map[string]string{"user": "note"}},
			Spec: SandboxClaimSpec{SandboxTemplateRef: &extv1beta1.SandboxTemplateRef{Name: tc.template}, WarmPool: tc.warmpool,
				Env: []extv1beta1.EnvVar{{Name: "A", Value: "1"}}}}
		in.APIVersion, in.Kind = GroupVersion.String(), "SandboxClaim"
		hub := in.ToV1beta1()
		if hub.Spec.WarmPoolRef.Name != tc.wantPool {
			t.Errorf("warmpool %q, template %q -> warmPoolRef %q, want %q", tc.warmpool, tc.template, hub.Spec.WarmPoolRef.Name, tc.wantPool)
		}
		same(t, "claim "+tc.warmpool, in, ClaimFromV1beta1(hub))
	}
	// A claim written as v1beta1 reads in v1alpha1 with warmpool = the pool,
	// and goes back unchanged.
	hub := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "p"}}}
	hub.APIVersion, hub.Kind = extv1beta1.GroupVersion.String(), "SandboxClaim"
	alpha := ClaimFromV1beta1(hub)
	if alpha.Spec.WarmPool != "p" {
		t.Errorf("warmpool %q, want p", alpha.Spec.WarmPool)
	}
	back := alpha.ToV1beta1()
	back.Annotations = withoutAnnotations(back.Annotations, AnnotationWarmPool)
	same(t, "v1beta1 claim", hub, back)
}

func TestTemplateConversionKeepsThePolicy(t *testing.T) {
	hub := &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}}
	hub.APIVersion, hub.Kind = extv1beta1.GroupVersion.String(), "SandboxTemplate"
	hub.Spec.PodTemplate.Spec = corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}
	hub.Spec.VolumeClaimTemplatesPolicy = extv1beta1.InjectionPolicyOverrides
	hub.Spec.EnvVarsInjectionPolicy = extv1beta1.InjectionPolicyAllowed
	alpha := TemplateFromV1beta1(hub)
	if alpha.Annotations[AnnotationVolumeClaimTemplatesPolicy] != "Overrides" {
		t.Fatalf("policy not kept: %v", alpha.Annotations)
	}
	same(t, "template", hub, alpha.ToV1beta1())
}

func TestPoolConversion(t *testing.T) {
	for _, r := range []int32{0, 1, 7} {
		in := &SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: SandboxWarmPoolSpec{Replicas: r, TemplateRef: extv1beta1.SandboxTemplateRef{Name: "t"}}}
		in.APIVersion, in.Kind = GroupVersion.String(), "SandboxWarmPool"
		same(t, "pool", in, PoolFromV1beta1(in.ToV1beta1()))
	}
}

// FuzzClaimRoundTrip: any v1alpha1 claim survives the trip through v1beta1.
func FuzzClaimRoundTrip(f *testing.F) {
	f.Add(`{"metadata":{"name":"c"},"spec":{"sandboxTemplateRef":{"name":"t"},"warmpool":"default"}}`)
	f.Add(`{"metadata":{"name":"c","annotations":{"a":"b"}},"spec":{"warmpool":"p","env":[{"name":"A","value":"1"}],"lifecycle":{"ttlSecondsAfterFinished":5}},"status":{"sandbox":{"name":"s"}}}`)
	f.Fuzz(func(t *testing.T, data string) {
		in := &SandboxClaim{}
		if err := json.Unmarshal([]byte(data), in); err != nil {
			return
		}
		for k := range in.Annotations {
			if k == AnnotationTemplateRef || k == AnnotationWarmPool {
				return // reserved for the conversion
			}
		}
		in.APIVersion, in.Kind = GroupVersion.String(), "SandboxClaim"
		same(t, "claim", in, ClaimFromV1beta1(in.ToV1beta1()))
	})
}
