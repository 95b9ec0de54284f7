package router

import (
	"context"
	"io"
	"net/http"
	"net/netip"
	"testing"
	"time"
)

// TestDNSFallbackChecksAddresses: under --dns-fallback, the name of a
// Sandbox the cache does not hold is resolved by the router and every
// address it resolves to must pass the rules of literal IPs: a name that
// resolves to loopback or a metadata service (or to one of them among
// others) is refused; one that resolves to a pod address gives that address,
// with the name kept for the Host header.
func TestDNSFallbackChecksAddresses(t *testing.T) {
	ctx := context.Background()
	dns := startDNS(t, map[string][]netip.Addr{
		"ok.team.svc.cluster.local":        {netip.MustParseAddr("fd00::7"), netip.MustParseAddr("10.1.2.3")},
		"loop.team.svc.cluster.local":      {netip.MustParseAddr("127.0.0.1")},
		"meta.team.svc.cluster.local":      {netip.MustParseAddr("169.254.169.254")},
		"meta6.team.svc.cluster.local":     {netip.MustParseAddr("fd00:ec2::254")},
		"linklocal.team.svc.cluster.local": {netip.MustParseAddr("169.254.1.1")},
		"mixed.team.svc.cluster.local":     {netip.MustParseAddr("10.1.2.4"), netip.MustParseAddr("127.0.0.1")},
	})
	r := &CacheResolver{Reader: testReader(t), DNSFallback: true, ClusterDomain: "cluster.local", DNS: dns.Resolver()}
	target := func(id string) Target { return Target{ID: id, Namespace: "team", Port: 8888} }

	ep, err := r.Resolve(ctx, target("ok"))
	if err != nil || ep.IP != netip.MustParseAddr("10.1.2.3") || ep.Host != "ok.team.svc.cluster.local" || ep.Source != SourceDNS {
		t.Errorf("a name resolving to pod addresses: %+v, %v (want its IPv4 address, the name as Host)", ep, err)
	}
	for _, id := range []string{"loop", "meta", "meta6", "linklocal", "mixed"} {
		if ep, err := r.Resolve(ctx, target(id)); err == nil || AsError(err).Reason != ReasonAddressForbidden || AsError(err).Status != http.StatusBadGateway {
			t.Errorf("%s: %+v, %v, want refused as a forbidden address", id, ep, err)
		}
	}
	if _, err := r.Resolve(ctx, target("nowhere")); err == nil || AsError(err).Status != http.StatusBadGateway {
		t.Errorf("a name that does not resolve: %v, want 502", err)
	}

	// With local addresses allowed (tests, local clusters) loopback and
	// link-local pass; metadata services never do.
	r.AllowLocalAddresses = true
	for id, ok := range map[string]bool{"loop": true, "linklocal": true, "mixed": true, "meta": false, "meta6": false} {
		_, err := r.Resolve(ctx, target(id))
		if (err == nil) != ok {
			t.Errorf("%s with local addresses allowed: %v, want allowed %t", id, err, ok)
		}
	}
}

// TestDNSFallbackDialsTheCheckedAddress: the router sends the request to
// the address it resolved and checked, never to the name again (one DNS
// question per request: a second answer, DNS rebinding, cannot swap the
// address), and the sandbox sees the name as Host.
func TestDNSFallbackDialsTheCheckedAddress(t *testing.T) {
	seen := make(chan string, 1)
	port := backendPort(t, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen <- r.Host }))
	const name = "box.team.svc.cluster.local"
	dns := startDNS(t, map[string][]netip.Addr{name: {netip.MustParseAddr("127.0.0.1")}})
	rt := newTestRouter(t, func(o *Options) {
		o.Resolver = &CacheResolver{Reader: testReader(t), DNSFallback: true, ClusterDomain: "cluster.local", DNS: dns.Resolver(), AllowLocalAddresses: true}
	})
	before := dns.Queries(name)
	req, _ := http.NewRequest(http.MethodGet, rt.URL+"/", nil)
	req.Header.Set("X-Sandbox-ID", "box")
	req.Header.Set("X-Sandbox-Namespace", "team")
	req.Header.Set("X-Sandbox-Port", port)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if host := <-seen; host != name+":"+port {
		t.Errorf("the sandbox saw Host %q, want %s:%s", host, name, port)
	}
	// The Go resolver asks A and AAAA once each; a second lookup would ask again.
	if n := dns.Queries(name) - before; n < 1 || n > 2 {
		t.Errorf("%d DNS questions for one request, want the router's own lookup only (1 or 2: A and AAAA)", n)
	}
}
