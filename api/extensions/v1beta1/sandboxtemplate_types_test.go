package v1beta1

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

func TestBlueprintCopiesTemplate(t *testing.T) {
	service := true
	spec := SandboxTemplateSpec{
		PodTemplate: sandboxv1beta1.PodTemplate{
			ObjectMeta: sandboxv1beta1.PodMetadata{Labels: map[string]string{"a": "1"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "img"}}},
		},
		VolumeClaimTemplates: []sandboxv1beta1.PersistentVolumeClaimTemplate{{
			EmbeddedObjectMetadata: sandboxv1beta1.EmbeddedObjectMetadata{Name: "data"},
		}},
		Service: &service,
	}
	bp := spec.Blueprint()
	want := sandboxv1beta1.SandboxBlueprint{
		PodTemplate:          spec.PodTemplate,
		VolumeClaimTemplates: spec.VolumeClaimTemplates,
		Service:              &service,
	}
	if !reflect.DeepEqual(bp, want) {
		t.Fatalf("Blueprint() = %+v, want %+v", bp, want)
	}
	// The copy must share no memory with the template.
	bp.PodTemplate.ObjectMeta.Labels["a"] = "changed"
	bp.PodTemplate.Spec.Containers[0].Image = "changed"
	bp.VolumeClaimTemplates[0].Name = "changed"
	*bp.Service = false
	if spec.PodTemplate.ObjectMeta.Labels["a"] != "1" || spec.PodTemplate.Spec.Containers[0].Image != "img" ||
		spec.VolumeClaimTemplates[0].Name != "data" || !*spec.Service {
		t.Fatalf("mutating the blueprint changed the template: %+v", spec)
	}
	if empty := (&SandboxTemplateSpec{}).Blueprint(); empty.Service != nil || empty.VolumeClaimTemplates != nil {
		t.Fatalf("Blueprint() of an empty spec = %+v, want nil service and volume claim templates", empty)
	}
}
