package client

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
)

// A router of this project says on GET /healthz which checks it makes
// beyond upstream's (HeaderRouterChecks); a sandbox cannot answer for it,
// as the router answers /healthz itself. Through a router that checks
// HeaderSandboxClaimUID, a claim that is Ready is opened without reading
// its Sandbox: every request names the claim, the router routes it only
// to the Sandbox that claim controls (API group, kind and UID), and its
// answers name that Sandbox's UID (HeaderSandboxUID), to which the
// handle's next requests are pinned. Through any other router, the SDK
// reads the Sandbox and checks it itself, as before.
const (
	HeaderRouterChecks    = "X-Sandbox-Router-Checks"
	HeaderSandboxClaimUID = "X-Sandbox-Claim-UID"
	checkClaimUID         = "claim-uid"
	// checkClaimRoute: a request naming only its claim (no
	// HeaderSandboxID) goes to the Sandbox the claim controls, once it
	// has taken one, and the answer names it (HeaderSandboxID and
	// HeaderSandboxUID). Create then waits for the claim through the
	// router (openRouted), not with a watch of its own.
	checkClaimRoute = "claim-route"
	// HeaderResolveOnly asks our router to answer a routed request itself
	// (204, naming the Sandbox) instead of sending it to the sandbox; a
	// router that does not know it sends it on, and the runtime answers.
	HeaderResolveOnly = "X-Sandbox-Resolve-Only"
)

// probeTimeout bounds a router's /healthz probe.
const probeTimeout = 5 * time.Second

// routerProbe is what one router said on /healthz: done closes once it
// answered (or could not), claimUID says it checks HeaderSandboxClaimUID
// and claimRoute that it routes by claim (checkClaimRoute).
type routerProbe struct {
	done                 chan struct{}
	claimUID, claimRoute bool
}

// checksClaims waits for the probe (or ctx) and says whether the router
// checks claim UIDs; false when it is not known.
func (p *routerProbe) checksClaims(ctx context.Context) bool {
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return p.claimUID
	case <-ctx.Done():
		return false
	}
}

// routesClaims waits for the probe (or ctx) and says whether the router
// routes by claim; false when it is not known.
func (p *routerProbe) routesClaims(ctx context.Context) bool {
	return p.checksClaims(ctx) && p.claimRoute
}

// routerChecks returns the probe of o's router (nil unless o goes through
// a router), asking it now if no answer is kept: one per Client and
// router URL, kept once the router answered, asked again after a failure.
// It runs alongside the claim's create and wait, so it costs no time.
func (c *Client) routerChecks(o *options) *routerProbe {
	if o.strategy != viaRouter {
		return nil
	}
	base := strings.TrimSuffix(o.url, "/") + "/"
	c.probesMu.Lock()
	defer c.probesMu.Unlock()
	if p, ok := c.probes[base]; ok {
		return p
	}
	if c.probes == nil {
		c.probes = map[string]*routerProbe{}
	}
	p := &routerProbe{done: make(chan struct{})}
	c.probes[base] = p
	hc := &http.Client{CheckRedirect: noRedirects, Timeout: probeTimeout}
	if o.httpClient != nil {
		hc.Transport = o.httpClient.Transport
	}
	go func() {
		defer close(p.done)
		answered, checks := probeRouter(hc, base)
		p.claimUID, p.claimRoute = checks[checkClaimUID], checks[checkClaimRoute]
		if !answered {
			c.probesMu.Lock()
			delete(c.probes, base)
			c.probesMu.Unlock()
		}
	}()
	return p
}

// probeRouter asks base's /healthz which checks it makes; answered is
// false when it could not.
func probeRouter(hc *http.Client, base string) (answered bool, checks map[string]bool) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"healthz", nil)
	if err != nil {
		return false, nil
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, nil
	}
	drainClose(resp)
	if resp.StatusCode != http.StatusOK {
		return false, nil
	}
	checks = map[string]bool{}
	for _, v := range resp.Header.Values(HeaderRouterChecks) {
		for _, check := range strings.Split(v, ",") {
			checks[strings.TrimSpace(check)] = true
		}
	}
	return true, checks
}

// openByClaim opens a bound claim's Sandbox without reading it, when the
// claim is Ready (so was its Sandbox) and the router checks claim UIDs;
// ok is false when it cannot (the caller reads the Sandbox then). Its
// PodName is the Sandbox's name.
func (c *Client) openByClaim(ctx context.Context, o *options, bound *extv1beta1.SandboxClaim, probe *routerProbe) (s *Sandbox, ok bool, err error) {
	if !meta.IsStatusConditionTrue(bound.Status.Conditions, extv1beta1.ConditionReady) || !probe.checksClaims(ctx) {
		return nil, false, nil
	}
	name := bound.Status.Sandbox.Name
	s = &Sandbox{namespace: bound.Namespace, name: name, claimName: bound.Name, podName: name, client: c, claimUID: bound.UID}
	if err := s.connect(ctx, o); err != nil {
		return nil, true, err
	}
	return s, true, nil
}

// uidPin is the Sandbox UID a handle's requests are pinned to: known when
// it was opened, or learned from its router's first answer when it was
// opened by claim. Copies of a conn share it.
type uidPin struct{ v atomic.Pointer[types.UID] }

func newPin(uid types.UID) *uidPin {
	p := &uidPin{}
	if uid != "" {
		p.v.Store(&uid)
	}
	return p
}

func (p *uidPin) get() types.UID {
	if p == nil {
		return ""
	}
	if u := p.v.Load(); u != nil {
		return *u
	}
	return ""
}

// learn pins to uid unless a UID is pinned already.
func (p *uidPin) learn(uid string) {
	if p != nil && uid != "" && p.v.Load() == nil {
		u := types.UID(uid)
		p.v.CompareAndSwap(nil, &u)
	}
}
