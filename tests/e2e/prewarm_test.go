package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	sdk "github.com/agentsandbox/reconciler/dataplane/client"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
)

// TestRouterPrewarmsPoolMembers: a router with --transport=port-forward
// (as kind's `make run` starts it, and a kwok cluster's with that flag)
// connects to the Pods of a warm pool's Ready
// members before anyone claims them, so a claim's first command through
// it makes no port-forward of its own: every connection the router holds
// is one it made ahead. The refill's new member is connected ahead too.
func TestRouterPrewarmsPoolMembers(t *testing.T) {
	if cluster.UseKind() {
		t.Skip("the router reaches kind's Pods at their IPs, with no port-forward")
	}
	c := newClient(t)
	ns := namespace(t, c)
	sdkPool(t, c, ns, 2)
	r := startRouter(t, "--namespaces="+ns, "--transport=port-forward")
	const dialled = `sandbox_router_port_forward_prewarms_total{result="dialled"}`
	const open = "sandbox_router_port_forwards"
	// made ahead == open: no connection was made by a request (none
	// closes here: no Pod goes, and the idle timeout is 15 min).
	aheadOnly := func(want float64) func() error {
		return func() error {
			m, err := tests.ScrapeMetrics(r.Metrics)
			if err != nil {
				return err
			}
			if m[dialled] != want || m[open] != want {
				return fmt.Errorf("%s %v, %s %v; want %v each", dialled, m[dialled], open, m[open], want)
			}
			return nil
		}
	}
	waitFor(t, 30*time.Second, "both members connected ahead", aheadOnly(2))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sc, err := sdk.New(local.Config, sdk.WithRouter(r.URL))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sc.Create(ctx, ns, "pool")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sb.Close(context.Background()) }()
	if res, err := sb.Run(ctx, "echo hi"); err != nil || res.Stdout != "hi\n" {
		t.Fatalf("Run(echo hi) = %+v, %v", res, err)
	}
	// The claimed member's connection carried the first command; the
	// refill's member is connected ahead once Ready.
	waitFor(t, time.Minute, "the refill connected ahead, nothing else dialled", aheadOnly(3))
}
