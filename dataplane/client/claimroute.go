package client

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/util/validation"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
)

// openRouted opens the Sandbox of created, a claim just made, through a
// router that routes by claim (checkClaimRoute), without watching the
// claim: one health request names only the claim, the router holds it
// until the claim has taken a Sandbox that answers, and its answer names
// that Sandbox (HeaderSandboxID) and its UID, to which the handle is
// pinned. So the first command can follow as soon as the claim controls
// its Sandbox, before the controller has written the claim's status. An
// error means the router did not answer so (the claim not bound within
// the router's wait, a refusal): Create waits for the claim as before.
func (c *Client) openRouted(ctx context.Context, o *options, created *extv1beta1.SandboxClaim) (*Sandbox, error) {
	s := &Sandbox{namespace: created.Namespace, claimName: created.Name, client: c, claimUID: created.UID}
	if err := s.connect(ctx, o); err != nil { // through a router, no request yet
		return nil, err
	}
	wctx, span := tracer().Start(ctx, "sandbox.wait_bound")
	resp, err := s.conn.do(wctx, request{op: "health", method: http.MethodGet, endpoint: s.conn.healthEndpoint(), idempotent: true})
	endSpan(span, nil, err)
	if err != nil {
		s.conn.close()
		return nil, fmt.Errorf("claim %s/%s through the router: %w", created.Namespace, created.Name, err)
	}
	drainClose(resp)
	name := resp.Header.Get(HeaderSandboxID)
	if len(validation.IsDNS1123Label(name)) > 0 || s.conn.uid.get() == "" {
		s.conn.close()
		return nil, fmt.Errorf("claim %s/%s: the router's answer does not name a Sandbox (%s %q)", created.Namespace, created.Name, HeaderSandboxID, name)
	}
	s.name, s.podName, s.conn.name = name, name, name
	return s, nil
}
