package router

import (
	"context"
	"net"
	"net/http"
)

// TrustPortForward lets through, without a token, requests that reached the
// router on a loopback address of its own Pod: on a cluster, the only
// clients that connect there are the API server's pods/portforward
// (kubectl port-forward, upstream's SDKs in their port-forward modes), and
// the API server has already authorized the caller for create on
// pods/portforward of this Pod in its namespace, a right as strong as
// exec (it reaches every port of every Pod of the namespace, the
// sandboxes' included). Every other request goes to Next (nil lets it
// through). Do not use it where something else delivers traffic to the
// Pod over loopback: a service-mesh sidecar that proxies inbound
// connections to 127.0.0.1, or the host network.
type TrustPortForward struct {
	Next Authorizer
}

// Authorize implements Authorizer.
func (a TrustPortForward) Authorize(ctx context.Context, r *http.Request, namespace, name string) *Error {
	if ViaLoopback(r) {
		return nil
	}
	if a.Next == nil {
		return nil
	}
	return a.Next.Authorize(ctx, r, namespace, name)
}

// AuthenticateRequest implements Authenticator: a request through the
// Pod's loopback is let through, any other goes to Next when it can
// authenticate before the Sandbox is known (else it waits for Authorize).
func (a TrustPortForward) AuthenticateRequest(ctx context.Context, r *http.Request) *Error {
	if ViaLoopback(r) {
		return nil
	}
	if n, ok := a.Next.(Authenticator); ok {
		return n.AuthenticateRequest(ctx, r)
	}
	return nil
}

// ViaLoopback reports whether the request's connection was made to a
// loopback address from a loopback address (what a port-forward into the
// Pod's network namespace does).
func ViaLoopback(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || !loopbackAddr(local.String()) {
		return false
	}
	return loopbackAddr(r.RemoteAddr)
}

func loopbackAddr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
