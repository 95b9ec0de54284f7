package ssa

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
)

// metadataDiffers answers "not already so" without extraction only where
// extraction would find desired differs too: for each desired, the
// comparison is made both ways, and extraction runs only where the
// metadata cannot tell.
func TestMetadataDiffersSkipsExtractionOnlyWhereItWouldDiffer(t *testing.T) {
	const fields = `{"f:metadata":{"f:labels":{"f:app":{}},"f:annotations":{"f:note":{}},"f:ownerReferences":{"k:{\"uid\":\"owner-1\"}":{}},"f:finalizers":{"v:\"keep\"":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"main\"}":{".":{},"f:image":{},"f:name":{}}}}}`
	live := podOwnedBy("mgr", "u1", "img:1", 0)
	live.Annotations = map[string]string{"note": "n"}
	live.Finalizers = []string{"keep"}
	live.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: "owner-1", Controller: ptr.To(true)}}
	live.ManagedFields[0].FieldsV1 = metav1.NewFieldsV1(fields)
	base := func() *corev1ac.PodApplyConfiguration {
		return corev1ac.Pod("box", "ns").WithLabels(map[string]string{"app": "box"}).WithAnnotations(map[string]string{"note": "n"}).
			WithFinalizers("keep").
			WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion("v1").WithKind("ConfigMap").WithName("o").WithUID("owner-1").WithController(true)).
			WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("main").WithImage("img:1")))
	}
	for _, tc := range []struct {
		name    string
		desired func() *corev1ac.PodApplyConfiguration
		skips   bool // answered from the metadata, no extraction
		same    bool
	}{
		{"as live", base, false, true},
		{"another image", func() *corev1ac.PodApplyConfiguration {
			d := base()
			d.Spec.Containers[0].WithImage("img:2")
			return d
		}, false, false},
		{"a new label", func() *corev1ac.PodApplyConfiguration { return base().WithLabels(map[string]string{"claimed": "yes"}) }, true, false},
		{"another label value", func() *corev1ac.PodApplyConfiguration { return base().WithLabels(map[string]string{"app": "other"}) }, true, false},
		{"an empty label live lacks", func() *corev1ac.PodApplyConfiguration { return base().WithLabels(map[string]string{"empty": ""}) }, true, false},
		{"the unowned label as live has it", func() *corev1ac.PodApplyConfiguration { return base().WithLabels(map[string]string{"other": "x"}) }, false, false},
		{"another annotation value", func() *corev1ac.PodApplyConfiguration { return base().WithAnnotations(map[string]string{"note": "m"}) }, true, false},
		{"a new owner", func() *corev1ac.PodApplyConfiguration {
			return base().WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion("v1").WithKind("ConfigMap").WithName("p").WithUID("owner-2"))
		}, true, false},
		{"the owner no longer controller", func() *corev1ac.PodApplyConfiguration {
			d := base()
			d.OwnerReferences[0].WithController(false)
			return d
		}, true, false},
		{"a new finalizer", func() *corev1ac.PodApplyConfiguration { return base().WithFinalizers("more") }, true, false},
	} {
		e := New(nil, "mgr", "mgr-status")
		calls := 0
		extract := countedExtractPod(&calls)
		k := objectKey("Pod", "mgr", "ns", "box")
		same, err := e.ownsDesired(k, live, tc.desired(), func() (any, error) { return extractRemembered(e, "Pod", live, "mgr", "", extract, false) })
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if same != tc.same || (calls == 0) != tc.skips {
			t.Errorf("%s: same %v with %d extractions; want same %v, skipped %v", tc.name, same, calls, tc.same, tc.skips)
		}
		// Extraction agrees wherever the metadata answered.
		owned, err := extract(live, "mgr")
		if err != nil {
			t.Fatal(err)
		}
		if tc.skips && equalOwned(owned, tc.desired()) {
			t.Errorf("%s: answered from the metadata, but extraction finds desired owned", tc.name)
		}
	}
}

func equalOwned(owned, desired *corev1ac.PodApplyConfiguration) bool {
	return Fingerprint(owned) == Fingerprint(desired)
}
