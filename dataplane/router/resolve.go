package router

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/resume"
)

// SandboxGVK is the kind the router resolves.
var SandboxGVK = sandboxv1beta1.GroupVersion.WithKind("Sandbox")

// How an Endpoint was found (a log and metric label).
const (
	SourceCache = "cache"  // the Sandbox and its Ready Pod, from the cache
	SourcePodIP = "pod-ip" // DNS fallback: the caller's X-Sandbox-Pod-IP
	SourceDNS   = "dns"    // DNS fallback: <id>.<ns>.svc.<cluster-domain>
)

// Endpoint is where a request goes.
type Endpoint struct {
	// Namespace and Sandbox name the Sandbox.
	Namespace, Sandbox string
	// Pod and PodUID name its Pod (empty with the DNS fallback).
	Pod    string
	PodUID types.UID
	// IP is the Pod IP to dial (invalid with the DNS form).
	IP netip.Addr
	// Host is the DNS name IP was resolved from (the DNS fallback): the
	// Host header the sandbox sees.
	Host string
	// Port is the port in the Pod.
	Port int
	// Source says how the endpoint was found.
	Source string
	// Resumed marks a Sandbox the request waited for (a resume on
	// connect, or a start): its Pod is Ready, but the server in it may not
	// listen yet, so refused connections are tried again (afterResume).
	Resumed bool
	// SandboxUID is the Sandbox's UID (empty with the DNS fallback).
	SandboxUID types.UID
	// IdleTimeout is the Sandbox's idle timeout (annotation
	// agents.x-k8s.io/idle-timeout): positive, requests to it are reported
	// as activity; zero, they are not.
	IdleTimeout time.Duration
}

// Resolver finds where a request for a Target goes. Its errors are
// *Error values (anything else answers 502).
type Resolver interface {
	Resolve(ctx context.Context, t Target) (Endpoint, error)
}

// ResolverFunc adapts a function to Resolver.
type ResolverFunc func(ctx context.Context, t Target) (Endpoint, error)

// Resolve calls f.
func (f ResolverFunc) Resolve(ctx context.Context, t Target) (Endpoint, error) { return f(ctx, t) }

// PodName is the name of a Sandbox's Pod: its agents.x-k8s.io/pod-name
// annotation, else the Sandbox's own name.
func PodName(sb metav1.Object) string {
	if n := sb.GetAnnotations()[sandboxv1beta1.AnnotationPodName]; n != "" {
		return n
	}
	return sb.GetName()
}

// Route decides where a request for t goes, given the Sandbox and its Pod
// (nil when there is none): the Sandbox must have the UID the caller
// expects (else 404: a handle pinned to a Sandbox that is gone never
// reaches another of the same name), be standalone or claimed, Running (not Suspended), and control a
// Ready Pod with an IP (the caller's X-Sandbox-Pod-IP, if set, among them;
// else IPv4 first). A refusal for a Sandbox that opted in to resume on
// connect carries Resume: a resume (or the one under way) may make it
// routable.
func Route(sb *sandboxv1beta1.Sandbox, pod *corev1.Pod, t Target) (Endpoint, *Error) {
	name := t.Namespace + "/" + t.ID
	if t.UID != "" && sb.UID != t.UID {
		// The Sandbox the caller resolved is gone: to its handle the
		// namesake does not exist. (Retry: the cache may still show the
		// one it replaced.)
		return Endpoint{}, &Error{Status: http.StatusNotFound, Reason: ReasonUIDMismatch, Retry: true,
			Detail: fmt.Sprintf("Sandbox %s with UID %s not found.", name, t.UID)}
	}
	if t.ClaimUID != "" {
		if ref := extv1beta1.ClaimOf(sb); ref == nil || ref.UID != t.ClaimUID {
			return Endpoint{}, &Error{Status: http.StatusNotFound, Reason: ReasonUIDMismatch, Retry: true,
				Detail: fmt.Sprintf("Sandbox %s is not the sandbox of claim UID %s.", name, t.ClaimUID)}
		}
	}
	if extv1beta1.IsUnclaimedWarmMember(sb) {
		return Endpoint{}, &Error{Status: http.StatusForbidden, Reason: ReasonWarmMember, Retry: true,
			Detail: fmt.Sprintf("Sandbox %s is an unclaimed warm pool member; claim one with a SandboxClaim.", name)}
	}
	if sb.DeletionTimestamp != nil {
		return Endpoint{}, &Error{Status: http.StatusConflict, Reason: ReasonNotReady, Retry: true,
			Detail: fmt.Sprintf("Sandbox %s is not ready: it is being deleted.", name)}
	}
	// An invalid annotation leaves the policy of the valid ones (never a
	// resume the user did not ask for); a suspended Sandbox's refusal says
	// what is wrong with it.
	policy, perr := sandboxv1beta1.ResumePolicyOf(sb.Annotations)
	var resumable *Resumable
	if policy.ResumeOnConnect || t.ResumeOnConnect {
		resumable = &Resumable{Key: resume.Key{Namespace: sb.Namespace, Name: sb.Name, UID: sb.UID}}
	}
	if sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended {
		if resumable == nil {
			detail := fmt.Sprintf("Sandbox %s is suspended and does not resume on connect; to let requests resume it, %s.", name, sandboxv1beta1.OptInHint)
			if perr != nil {
				detail += " (" + perr.Error() + ")"
			}
			return Endpoint{}, &Error{Status: http.StatusConflict, Reason: ReasonSuspended, Detail: detail}
		}
		resumable.Suspended = true
		return Endpoint{}, &Error{Status: http.StatusConflict, Reason: ReasonSuspended, Resume: resumable,
			Detail: fmt.Sprintf("Sandbox %s is suspended (it resumes on connect).", name)}
	}
	notReady := func(why string) (Endpoint, *Error) {
		return Endpoint{}, &Error{Status: http.StatusConflict, Reason: ReasonNotReady, Retry: true, Resume: resumable,
			Detail: fmt.Sprintf("Sandbox %s is not ready: %s.", name, why)}
	}
	if pod == nil {
		return notReady("it has no pod")
	}
	if !sandboxv1beta1.IsControlledBy(pod, sb, sandboxv1beta1.SandboxKind) {
		return notReady("pod " + pod.Name + " is not controlled by it")
	}
	switch {
	case pod.DeletionTimestamp != nil:
		return notReady("pod " + pod.Name + " is terminating")
	case pod.Status.Phase != corev1.PodRunning:
		return notReady("pod " + pod.Name + " is " + strings.ToLower(string(pod.Status.Phase)))
	case !podReady(pod):
		return notReady("pod " + pod.Name + " is not Ready")
	}
	ips := podIPs(pod)
	if len(ips) == 0 {
		return notReady("pod " + pod.Name + " has no IP")
	}
	ip := ips[0]
	if t.PodIP.IsValid() {
		ip = netip.Addr{}
		for _, a := range ips {
			if a == t.PodIP {
				ip = a
			}
		}
		if !ip.IsValid() {
			return Endpoint{}, &Error{Status: http.StatusConflict, Reason: ReasonPodIPMismatch, Retry: true,
				Detail: fmt.Sprintf("Sandbox %s: %s is not an IP of its pod %s.", name, t.PodIP, pod.Name)}
		}
	}
	return Endpoint{Namespace: t.Namespace, Sandbox: t.ID, Pod: pod.Name, PodUID: pod.UID, IP: ip, Port: t.Port, Source: SourceCache,
		SandboxUID: sb.UID, IdleTimeout: policy.IdleTimeout}, nil
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podIPs are a Pod's IPs, IPv4 first (as upstream's SDK prefers them).
func podIPs(pod *corev1.Pod) []netip.Addr {
	raw := make([]string, 0, len(pod.Status.PodIPs)+1)
	for _, p := range pod.Status.PodIPs {
		raw = append(raw, p.IP)
	}
	if len(raw) == 0 && pod.Status.PodIP != "" {
		raw = append(raw, pod.Status.PodIP)
	}
	var v4, v6 []netip.Addr
	for _, s := range raw {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		if a = a.Unmap(); a.Is4() {
			v4 = append(v4, a)
		} else {
			v6 = append(v6, a)
		}
	}
	return append(v4, v6...)
}

// CacheResolver resolves through a cache (or any reader) of Sandboxes
// (NewCache's, trimmed) and of sandbox Pods.
type CacheResolver struct {
	// Reader reads Sandboxes (sandboxv1beta1.Sandbox) and Pods.
	Reader client.Reader
	// DNSFallback sends a request for a Sandbox the cache does not hold to
	// X-Sandbox-Pod-IP, else to <id>.<ns>.svc.<ClusterDomain>, as upstream's
	// router does; off, such requests get 404. The name is resolved here
	// and every address it resolves to must pass AllowedAddress; the
	// request is sent to the address checked, never to the name again (so
	// a second answer, DNS rebinding, cannot swap it). A request pinned to
	// a UID (X-Sandbox-UID) or to a claim (X-Sandbox-Claim-UID, or a front
	// door's claim) always gets 404: what DNS reaches cannot be checked.
	DNSFallback   bool
	ClusterDomain string
	// DNS resolves the fallback's names; nil is net.DefaultResolver.
	DNS *net.Resolver
	// AllowLocalAddresses lets the fallback's names resolve to loopback
	// and link-local addresses (Limits.AllowLocalAddresses).
	AllowLocalAddresses bool
	// Namespaces, if set, are the only namespaces routed to (the ones the
	// cache watches); Sandboxes elsewhere are not found.
	Namespaces []string
}

// Resolve implements Resolver.
func (r *CacheResolver) Resolve(ctx context.Context, t Target) (Endpoint, error) {
	if t.ID == "" {
		return r.resolveClaim(ctx, t)
	}
	if len(r.Namespaces) > 0 && !slices.Contains(r.Namespaces, t.Namespace) {
		return Endpoint{}, &Error{Status: http.StatusNotFound, Reason: ReasonNotFound,
			Detail: fmt.Sprintf("Sandbox %s/%s not found.", t.Namespace, t.ID)}
	}
	sb := &sandboxv1beta1.Sandbox{}
	err := r.Reader.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: t.ID}, sb)
	switch {
	case apierrors.IsNotFound(err) && r.DNSFallback && t.UID == "" && t.ClaimUID == "":
		ep := Endpoint{Namespace: t.Namespace, Sandbox: t.ID, Port: t.Port, IP: t.PodIP, Source: SourcePodIP}
		if t.PodIP.IsValid() {
			return ep, nil
		}
		return r.lookup(ctx, t)
	case apierrors.IsNotFound(err):
		return Endpoint{}, &Error{Status: http.StatusNotFound, Reason: ReasonNotFound, Retry: true,
			Detail: fmt.Sprintf("Sandbox %s/%s not found.", t.Namespace, t.ID)}
	case err != nil:
		return Endpoint{}, &Error{Status: http.StatusBadGateway, Reason: ReasonCacheError,
			Detail: fmt.Sprintf("Could not look up sandbox %s/%s.", t.Namespace, t.ID)}
	}
	return r.route(ctx, sb, t)
}

// route routes t to sb with its Pod from the cache (Route).
func (r *CacheResolver) route(ctx context.Context, sb *sandboxv1beta1.Sandbox, t Target) (Endpoint, error) {
	pod := &corev1.Pod{}
	if err := r.Reader.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: PodName(sb)}, pod); apierrors.IsNotFound(err) {
		pod = nil
	} else if err != nil {
		return Endpoint{}, &Error{Status: http.StatusBadGateway, Reason: ReasonCacheError,
			Detail: fmt.Sprintf("Could not look up the pod of sandbox %s/%s.", t.Namespace, t.ID)}
	}
	ep, rerr := Route(sb, pod, t)
	if rerr != nil {
		return ep, rerr
	}
	return ep, nil
}

// lookup resolves the DNS fallback's name for t and checks every address
// it resolves to; the endpoint is the first allowed one (IPv4 first).
func (r *CacheResolver) lookup(ctx context.Context, t Target) (Endpoint, error) {
	host := t.ID + "." + t.Namespace + ".svc." + r.ClusterDomain
	dns := r.DNS
	if dns == nil {
		dns = net.DefaultResolver
	}
	addrs, err := dns.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return Endpoint{}, &Error{Status: http.StatusBadGateway, Reason: ReasonNotFound,
			Detail: fmt.Sprintf("Could not connect to the backend sandbox: %s (%s does not resolve).", t.ID, host)}
	}
	var v4, v6 []netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if !AllowedAddress(a, r.AllowLocalAddresses) {
			return Endpoint{}, &Error{Status: http.StatusBadGateway, Reason: ReasonAddressForbidden,
				Detail: fmt.Sprintf("Could not connect to the backend sandbox: %s (%s resolves to %s, which is not allowed).", t.ID, host, a)}
		}
		if a.Is4() {
			v4 = append(v4, a)
		} else {
			v6 = append(v6, a.WithZone(""))
		}
	}
	ip := append(v4, v6...)[0]
	return Endpoint{Namespace: t.Namespace, Sandbox: t.ID, Port: t.Port, IP: ip, Host: host, Source: SourceDNS}, nil
}
