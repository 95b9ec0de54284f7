package client

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
)

// openRouted opens the Sandbox of created, a claim just made, through a
// router that routes by claim (checkClaimRoute), without watching the
// claim: one request names only the claim, the router holds it until the
// claim controls a routable Sandbox and answers it itself
// (HeaderResolveOnly; a router that does not know the header sends it on
// to the runtime, a health check), naming that Sandbox (HeaderSandboxID)
// and its UID, to which the handle is pinned. So the first command can
// follow as soon as the claim controls its Sandbox, before the controller
// has written the claim's status; as after seeing a claim Ready, the
// runtime is not asked first (the router sends a command again while the
// Pod refuses its connection). An
// error means the router did not answer so (the claim not bound within
// the router's wait, a refusal): Create waits for the claim as before.
func (c *Client) openRouted(ctx context.Context, o *options, created *extv1beta1.SandboxClaim) (*Sandbox, error) {
	s := &Sandbox{namespace: created.Namespace, claimName: created.Name, client: c, claimUID: created.UID}
	if err := s.connect(ctx, o); err != nil { // through a router, no request yet
		return nil, err
	}
	wctx, span := tracer().Start(ctx, "sandbox.wait_bound")
	resp, err := s.conn.do(wctx, request{op: "health", method: http.MethodGet, endpoint: s.conn.healthEndpoint(), idempotent: true, resolveOnly: true})
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

// routedTimeout is the error of a Create whose routed wait (openRouted)
// ran out of time: what the claim says of itself, read once, as the
// claim's watch would have said it.
func (c *Client) routedTimeout(ctx context.Context, created *extv1beta1.SandboxClaim, err error) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	cl := &extv1beta1.SandboxClaim{}
	if gerr := c.extensions.Get().Namespace(created.Namespace).Resource("sandboxclaims").Name(created.Name).Do(rctx).Into(cl); gerr != nil || cl.UID != created.UID {
		return err
	}
	if claimBound(cl) {
		return fmt.Errorf("claim %s/%s: bound to sandbox %s (%s), whose runtime did not answer through the router: %w",
			cl.Namespace, cl.Name, cl.Status.Sandbox.Name, readyCondition(cl.Status.Conditions), err)
	}
	return fmt.Errorf("claim %s/%s: no sandbox bound (%s): %w", cl.Namespace, cl.Name, readyCondition(cl.Status.Conditions), err)
}
