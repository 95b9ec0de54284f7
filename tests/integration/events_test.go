package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/reconciler/apply/eventgate"
)

// TestEventInATerminatingNamespace writes an Event into a namespace being
// deleted (no namespace controller runs here, so it stays Terminating):
// the API server refuses it as NamespaceLifecycle does on a cluster, and
// the controller's sink counts that refusal as sent rather than handing
// the broadcaster an error to log, while an Event in a live namespace is
// still written.
func TestEventInATerminatingNamespace(t *testing.T) {
	ctx := context.Background()
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	live, gone := env.Namespace(t), env.Namespace(t)
	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gone}}); err != nil {
		t.Fatal(err)
	}
	event := func(ns string) *eventsv1.Event {
		return &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "claim-"},
			EventTime:  metav1.NewMicroTime(time.Now()), ReportingController: "agents.x-k8s.io/test", ReportingInstance: "test",
			Action: "Adoption", Reason: "SandboxAdopted", Type: corev1.EventTypeNormal, Note: "test",
			Regarding: corev1.ObjectReference{Kind: "SandboxClaim", Namespace: ns, Name: "claim-08"},
		}
	}
	plain := &events.EventSinkImpl{Interface: cs.EventsV1()}

	_, err = plain.Create(ctx, event(gone))
	var status apierrors.APIStatus
	if !apierrors.IsForbidden(err) || !errors.As(err, &status) || !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		t.Fatalf("an Event in a terminating namespace: %v; want Forbidden with the %s cause", err, corev1.NamespaceTerminatingCause)
	}
	skipping := eventgate.SkipGoneNamespaces(plain)
	if _, err := skipping.Create(ctx, event(gone)); err != nil {
		t.Errorf("through SkipGoneNamespaces: %v, want it counted as sent", err)
	}
	written, err := skipping.Create(ctx, event(live))
	if err != nil || written == nil || written.Name == "" {
		t.Fatalf("an Event in a live namespace through SkipGoneNamespaces: %v, %v", written, err)
	}
}
