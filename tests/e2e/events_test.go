package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// TestClaimEventReachesTheAPIServer checks the controller binary's event
// path: a claim that takes a warm member gets upstream's SandboxAdopted
// Event (events.k8s.io/v1, from sandbox-claim-controller), sent once the
// controller's writes are done (--event-hold-max), with the time it was
// recorded at.
func TestClaimEventReachesTheAPIServer(t *testing.T) {
	c := newClient(t)
	ns := namespace(t, c)
	ctx := context.Background()
	makePool(t, c, ns, 1)
	sent := time.Now()
	if err := c.Create(ctx, e2eClaim(ns, "took", "pool")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "claim Ready", claimReady(c, ns, "took"))
	claim := &extv1beta1.SandboxClaim{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "took"}, claim); err != nil {
		t.Fatal(err)
	}
	var got eventsv1.Event
	took := waitFor(t, 30*time.Second, "SandboxAdopted Event on the claim", func() error {
		list := &eventsv1.EventList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Regarding.UID == claim.UID && ev.Reason == sandboxv1beta1.EventSandboxAdopted {
				got = ev
				return nil
			}
		}
		return fmt.Errorf("%d Events in %s, none SandboxAdopted on the claim", len(list.Items), ns)
	})
	if got.ReportingController != "sandbox-claim-controller" || got.Type != "Normal" {
		t.Errorf("Event from %q, type %q; want sandbox-claim-controller, Normal", got.ReportingController, got.Type)
	}
	if got.Related == nil || got.Related.Name != claim.Status.Sandbox.Name {
		t.Errorf("Event related %+v; want the bound Sandbox %s", got.Related, claim.Status.Sandbox.Name)
	}
	// Held or not, the Event says when it was recorded: after the claim
	// was sent and before it was seen here.
	if at := got.EventTime.Time; at.Before(sent.Add(-time.Second)) || at.After(time.Now()) {
		t.Errorf("eventTime %s, outside [%s, now]", at, sent)
	}
	t.Logf("SandboxAdopted seen %s after the claim was Ready: %q", took.Round(time.Millisecond), got.Note)
}
