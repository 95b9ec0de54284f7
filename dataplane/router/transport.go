package router

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// podHostSuffix marks a URL host that names a Pod reached by its UID
// through a podDialer (<pod-uid>.pod.invalid): .invalid never resolves, so
// such a host can never be dialled by mistake.
const podHostSuffix = ".pod.invalid"

// unresolvedHost is the URL host of an endpoint with neither an address
// nor a Pod UID: it ends in .invalid too, and is refused before any dial.
const unresolvedHost = "unresolved.invalid"

// podDialer reaches a port of the Pod a UID names (named by Remember
// first): PortForward through the API server, KwokForwards where a local
// kwok cluster says the Pod's port is.
type podDialer interface {
	Remember(uid types.UID, namespace, name string)
	DialPod(ctx context.Context, uid types.UID, port int) (net.Conn, error)
}

// Transport carries requests to endpoints: it turns an Endpoint into the
// URL host (and Host header) of the outgoing request and dials it: directly,
// or by the Pod's UID through a podDialer (a PortForward: the API server;
// KwokForwards: where a local kwok cluster's PortForward objects say a
// Pod's port is).
type Transport struct {
	rt   *http.Transport
	pods podDialer    // nil: pod IPs are dialled directly
	pf   *PortForward // closed with the Transport
}

// NewKwokTransport returns a Transport reaching Pods where their kwok
// PortForward objects say they are (--transport=kwok).
func NewKwokTransport(k *KwokForwards) *Transport {
	t := NewTransport(nil)
	t.pods = k
	return t
}

// NewTransport returns a Transport dialling pod IPs directly, or through pf
// when pf is set (endpoints without a Pod, from the DNS fallback, are
// always dialled directly).
func NewTransport(pf *PortForward) *Transport {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	t := &Transport{pf: pf}
	if pf != nil {
		t.pods = pf
	}
	t.rt = &http.Transport{
		Proxy: nil, // pod traffic never goes through an environment proxy
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if host == unresolvedHost {
				return nil, errNoForward
			}
			uid, byUID := strings.CutSuffix(host, podHostSuffix)
			if !byUID {
				return d.DialContext(ctx, network, addr)
			}
			if t.pods == nil {
				return nil, errNoForward
			}
			p, err := strconv.Atoi(port)
			if err != nil {
				return nil, err
			}
			return t.pods.DialPod(ctx, types.UID(uid), p)
		},
		ForceAttemptHTTP2:     false,
		DisableCompression:    true, // bodies pass through as the sandbox sends them
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return t
}

// RoundTripper is the http.RoundTripper for the reverse proxy.
func (t *Transport) RoundTripper() http.RoundTripper { return t.rt }

// Address returns the URL host requests to ep go to and the Host header
// the sandbox sees: the pod's ip:port; with the DNS fallback, the address
// the name was resolved to (and checked), never the name again, and the
// name and port as the Host header.
func (t *Transport) Address(ep Endpoint) (urlHost, hostHeader string) {
	port := strconv.Itoa(ep.Port)
	ipPort := ""
	if ep.IP.IsValid() {
		ipPort = netip.AddrPortFrom(ep.IP, uint16(ep.Port)).String()
	}
	hostHeader = ipPort
	if ep.Host != "" {
		hostHeader = net.JoinHostPort(ep.Host, port)
	}
	if t.pods != nil && ep.PodUID != "" {
		t.pods.Remember(ep.PodUID, ep.Namespace, ep.Pod)
		return string(ep.PodUID) + podHostSuffix + ":" + port, hostHeader
	}
	if ipPort == "" { // not resolved: nothing is dialled by name
		return unresolvedHost + ":" + port, hostHeader
	}
	return ipPort, hostHeader
}

// CloseIdleConnections closes idle upstream connections (and, with a
// PortForward, every port-forward connection).
func (t *Transport) CloseIdleConnections() {
	t.rt.CloseIdleConnections()
	if t.pf != nil {
		t.pf.Close()
	}
}
