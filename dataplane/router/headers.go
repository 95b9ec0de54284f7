package router

import (
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Request headers of upstream's router contract.
const (
	// HeaderSandboxID names the Sandbox (a DNS-1123 label). Required,
	// unless HeaderClaimUID names the claim whose Sandbox is meant
	// (CheckClaimRoute). Our answers carry it too: the Sandbox routed to.
	HeaderSandboxID = "X-Sandbox-ID"
	// HeaderNamespace is the Sandbox's namespace; default DefaultNamespace.
	HeaderNamespace = "X-Sandbox-Namespace"
	// HeaderPort is the port in the sandbox Pod; default DefaultPort.
	HeaderPort = "X-Sandbox-Port"
	// HeaderUID, when set, must be the Sandbox's UID (so a request meant for
	// a Sandbox that was deleted and made again under the same name fails).
	HeaderUID = "X-Sandbox-UID"
	// HeaderClaimUID, when set, must be the UID of the SandboxClaim that
	// controls the Sandbox (so a client that knows its claim, not yet its
	// Sandbox, reaches only the claim's own). Not in upstream's router.
	HeaderClaimUID = "X-Sandbox-Claim-UID"
	// HeaderPodIP, when set, must be one of the Pod's IPs (the router never
	// dials an address the cluster does not give the Sandbox's Pod, unless
	// the DNS fallback is on and the Sandbox is unknown).
	HeaderPodIP = "X-Sandbox-Pod-IP"
	// HeaderTimeout is the request's timeout in seconds (a float). Invalid,
	// non-finite and non-positive values mean the default; larger values
	// than the maximum are cut to it.
	HeaderTimeout = "X-Sandbox-Timeout"
	// HeaderNotForwarded ("true") marks an answer the router made itself
	// without the request reaching the sandbox: a refusal (authorization,
	// routing, limits) or a connection to the sandbox that failed before
	// the sandbox got the request (after UpstreamRetries). A client may send
	// such a request again whatever its method. Not in upstream's router.
	HeaderNotForwarded = "X-Sandbox-Not-Forwarded"
	// HeaderResolveOnly ("true") asks the router to route the request,
	// its caller authorized and its Sandbox waited for as for any request,
	// and to answer 204 itself with the Sandbox's name and UID
	// (HeaderSandboxID, HeaderUID) instead of sending it on: a client that
	// named only its claim learns its Sandbox without a round trip to the
	// sandbox. Not in upstream's router (which sends such a request on, and
	// our router's answers name the Sandbox either way).
	HeaderResolveOnly = "X-Sandbox-Resolve-Only"
	// HeaderRequestID is passed on; the router makes one when it is missing
	// and returns it in the response.
	HeaderRequestID = "X-Request-ID"
	// HeaderRuntimeToken carries the shared secret the sandbox runtime may
	// require of requests (--runtime-token-file): the router sets it on
	// every proxied request when configured and never passes on a value a
	// client sent.
	HeaderRuntimeToken = "X-Sandbox-Runtime-Token"
)

// Response headers the router adds; not in upstream's router.
const (
	// HeaderChecks, on /healthz, lists the request checks this router
	// makes beyond upstream's (comma-separated; CheckClaimUID): a client
	// learns from its router, which a sandbox cannot answer for, that it
	// may rely on them.
	HeaderChecks = "X-Sandbox-Router-Checks"
	// CheckClaimUID: HeaderClaimUID is checked on every request.
	CheckClaimUID = "claim-uid"
	// CheckClaimRoute: a request with HeaderClaimUID and no HeaderSandboxID
	// goes to the Sandbox that claim controls, waiting (up to the resolve
	// wait) for the claim to take one; its answer names that Sandbox
	// (HeaderSandboxID and HeaderUID).
	CheckClaimRoute = "claim-route"
)

// RouterChecks is HeaderChecks' value on this router's /healthz.
var RouterChecks = CheckClaimUID + ", " + CheckClaimRoute

// Defaults of upstream's router.
const (
	DefaultNamespace = "default"
	DefaultPort      = 8888
)

// maxUIDLength bounds X-Sandbox-UID (a UID is a 36-character UUID).
const maxUIDLength = 128

// Target is what a request's headers ask for.
type Target struct {
	// ID is the Sandbox's name; empty, the Sandbox ClaimUID controls
	// (found by the resolver, CheckClaimRoute).
	ID string
	// Namespace is the Sandbox's namespace.
	Namespace string
	// Port is the port in the sandbox Pod.
	Port int
	// UID is the Sandbox UID the caller expects, or empty.
	UID types.UID
	// PodIP is the Pod IP the caller expects; the zero Addr when unset.
	PodIP netip.Addr
	// Timeout bounds the request (X-Sandbox-Timeout, else the default).
	Timeout time.Duration
	// ClaimUID, when set, must be the UID of the SandboxClaim controlling
	// the Sandbox (group, kind and UID): a front door that found the
	// Sandbox through a claim, or a client that sent X-Sandbox-Claim-UID,
	// never reaches one the claim does not own. It only ever narrows what
	// a request reaches.
	ClaimUID types.UID
	// ResumeOnConnect makes the Sandbox resume on connect as if it had
	// opted in by annotation: set by a front door whose own record of the
	// Sandbox asked for it (an E2B sandbox created with autoResume). Never
	// read from headers.
	ResumeOnConnect bool
}

// Limits are the operator's bounds on what headers may ask for.
type Limits struct {
	// DefaultTimeout applies without a (valid) X-Sandbox-Timeout.
	DefaultTimeout time.Duration
	// MaxTimeout caps X-Sandbox-Timeout; zero means DefaultTimeout.
	MaxTimeout time.Duration
	// AllowLocalAddresses lets loopback and link-local addresses through,
	// in X-Sandbox-Pod-IP and as Pod IPs (for tests and local clusters).
	AllowLocalAddresses bool
}

// ParseTarget reads and checks the routing headers, with upstream's error
// messages.
func ParseTarget(h http.Header, l Limits) (Target, *Error) {
	t := Target{ID: h.Get(HeaderSandboxID), Namespace: h.Get(HeaderNamespace), Port: DefaultPort}
	if t.ID == "" && h.Get(HeaderClaimUID) == "" {
		return t, badRequest("X-Sandbox-ID header is required.")
	}
	if t.ID != "" && len(validation.IsDNS1123Label(t.ID)) > 0 {
		return t, badRequest("Invalid sandbox ID format.")
	}
	if t.Namespace == "" {
		t.Namespace = DefaultNamespace
	}
	if len(validation.IsDNS1123Label(t.Namespace)) > 0 {
		return t, badRequest("Invalid namespace format.")
	}
	if raw := h.Get(HeaderPort); raw != "" {
		p, err := strconv.Atoi(raw)
		if err != nil || p < 1 || p > 65535 {
			return t, badRequest("Invalid port format.")
		}
		t.Port = p
	}
	if raw := h.Get(HeaderUID); raw != "" {
		if !validUID(raw) {
			return t, badRequest("Invalid sandbox UID format.")
		}
		t.UID = types.UID(raw)
	}
	if raw := h.Get(HeaderClaimUID); raw != "" {
		if !validUID(raw) {
			return t, badRequest("Invalid claim UID format.")
		}
		t.ClaimUID = types.UID(raw)
	}
	if raw := h.Get(HeaderPodIP); raw != "" {
		ip, err := netip.ParseAddr(raw)
		if err != nil || ip.Zone() != "" {
			return t, badRequest("Invalid target IP address format.")
		}
		ip = ip.Unmap()
		if !AllowedAddress(ip, l.AllowLocalAddresses) {
			return t, badRequest("Invalid target IP address.")
		}
		t.PodIP = ip
	}
	t.Timeout = parseTimeout(h.Get(HeaderTimeout), l)
	return t, nil
}

// metadataAddresses are cloud metadata services: no sandbox is ever there.
// (169.254.169.254, the usual one, is link-local; AWS's IPv6 one and
// Alibaba's are not.)
var metadataAddresses = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("169.254.170.2"),
	netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("100.100.100.200"),
}

// AllowedAddress reports whether the router may dial ip: never an
// unspecified, multicast or broadcast address or a cloud metadata service;
// loopback and link-local ones only when allowLocal is set.
func AllowedAddress(ip netip.Addr, allowLocal bool) bool {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid(), ip.IsUnspecified(), ip.IsMulticast(), ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return false
	case slices.Contains(metadataAddresses, ip):
		return false
	case ip.IsLoopback(), ip.IsLinkLocalUnicast():
		return allowLocal
	}
	return true
}

// parseTimeout reads X-Sandbox-Timeout as upstream does: seconds as a
// float; anything unusable means the default, more than the maximum is cut.
func parseTimeout(raw string, l Limits) time.Duration {
	maxTimeout := l.MaxTimeout
	if maxTimeout <= 0 {
		maxTimeout = l.DefaultTimeout
	}
	if raw == "" {
		return l.DefaultTimeout
	}
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
		return l.DefaultTimeout
	}
	if f >= maxTimeout.Seconds() {
		return maxTimeout
	}
	d := time.Duration(f * float64(time.Second))
	if d <= 0 {
		return l.DefaultTimeout
	}
	return d
}

// validUID accepts what the API server hands out as UIDs (UUIDs) and
// nothing that could smuggle other characters into logs.
func validUID(s string) bool {
	if len(s) > maxUIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && c != '-' {
			return false
		}
	}
	return true
}
