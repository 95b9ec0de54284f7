package policy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// TestDeniedTemplateIsReported: a template whose Sandboxes the policies
// refuse says so with one Warning event, even before any pool or claim
// uses it (templates have no status); templates the controller's default
// runtime class makes compliant are not reported.
func TestDeniedTemplateIsReported(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	for name, spec := range map[string]corev1.PodSpec{
		"root":    podSpec(gvisor, privileged),
		"default": podSpec(), // the default gVisor fills the runtime class
	} {
		tmpl := &extv1beta1.SandboxTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       extv1beta1.SandboxTemplateSpec{PodTemplate: sandboxv1beta1.PodTemplate{Spec: spec}},
		}
		if err := env.Client.Create(ctx, tmpl); err != nil {
			t.Fatal(err)
		}
	}
	warnings := func() (map[string][]string, error) {
		var evs eventsv1.EventList
		if err := env.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		out := map[string][]string{}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && e.Regarding.Kind == "SandboxTemplate" {
				out[e.Regarding.Name] = append(out[e.Regarding.Name], e.Reason+": "+e.Note)
			}
		}
		return out, nil
	}
	eventually(t, "the denied template is reported", func() error {
		got, err := warnings()
		if err != nil {
			return err
		}
		if len(got["root"]) != 1 || !strings.HasPrefix(got["root"][0], sandboxv1beta1.ReasonPolicyDenied+": ") ||
			!strings.Contains(got["root"][0], "privileged containers are not allowed: agent") {
			return fmt.Errorf("events: %v", got)
		}
		return nil
	})
	// Looked at again (a label change), it is not reported again; the
	// compliant template never is.
	tmpl := &extv1beta1.SandboxTemplate{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "root"}, tmpl); err != nil {
		t.Fatal(err)
	}
	// A merge patch: the controller may have written the template since
	// the Get (an Update would then fail with a conflict).
	before := tmpl.DeepCopy()
	tmpl.Labels = map[string]string{"touched": "yes"}
	if err := env.Client.Patch(ctx, tmpl, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	got, err := warnings()
	if err != nil {
		t.Fatal(err)
	}
	if len(got["root"]) != 1 || len(got["default"]) != 0 {
		t.Errorf("events: %v; want one for root and none for default", got)
	}
}
