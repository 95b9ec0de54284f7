package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/agentsandbox/reconciler/api/convert"
)

// resources maps the kinds we check to their resources.
var resources = map[schema.GroupKind]string{
	{Group: "", Kind: "Pod"}:                                       "pods",
	{Group: "", Kind: "Service"}:                                   "services",
	{Group: "", Kind: "PersistentVolumeClaim"}:                     "persistentvolumeclaims",
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}:            "networkpolicies",
	{Group: "agents.x-k8s.io", Kind: "Sandbox"}:                    "sandboxes",
	{Group: "extensions.agents.x-k8s.io", Kind: "SandboxTemplate"}: "sandboxtemplates",
	{Group: "extensions.agents.x-k8s.io", Kind: "SandboxClaim"}:    "sandboxclaims",
	{Group: "extensions.agents.x-k8s.io", Kind: "SandboxWarmPool"}: "sandboxwarmpools",
}

// ObjectOf turns a typed object or an apply configuration (anything that
// marshals to a Kubernetes object with apiVersion and kind) into an Object
// to check.
func ObjectOf(v any) (Object, error) {
	u, err := convert.Unstructured(v)
	if err != nil {
		return Object{}, fmt.Errorf("policy: %w", err)
	}
	gvk := u.GroupVersionKind()
	res, ok := resources[gvk.GroupKind()]
	if !ok {
		return Object{}, fmt.Errorf("policy: %s is not a kind policies check", gvk)
	}
	return Object{GVR: gvk.GroupVersion().WithResource(res), Object: u}, nil
}

// CheckAll checks each object (typed or apply configuration) as if it were
// being created and returns all decisions.
func (s *Set) CheckAll(ctx context.Context, objs ...any) ([]Decision, error) {
	if s == nil || len(s.policies) == 0 {
		return nil, nil
	}
	var out []Decision
	for _, v := range objs {
		o, err := ObjectOf(v)
		if err != nil {
			return nil, err
		}
		out = append(out, s.Check(ctx, o)...)
	}
	return out, nil
}

// Holder holds the current policy set; the controller and the webhooks
// read it on every check, and a reload swaps it whole. The zero value holds
// no policies.
type Holder struct {
	p atomic.Pointer[Set]
	// NamespaceLabels, when set, returns a namespace's labels (nil when it
	// cannot tell: the defaults apply), so that In can apply the mode
	// labels.
	NamespaceLabels func(ctx context.Context, namespace string) map[string]string
	// Exempt namespaces are never blocked (see Namespaces).
	Exempt []string
}

// In returns a context whose checks use the bundle modes in force in a
// namespace: the set's defaults overridden by the namespace's labels, with
// the problems found in those labels. Without defaults (a set not loaded
// with Modes) or a label source, ctx is returned as is.
func (h *Holder) In(ctx context.Context, namespace string) (context.Context, []string) {
	set := h.Get()
	if set == nil || set.defaults == nil || h.NamespaceLabels == nil {
		return ctx, nil
	}
	modes, problems := Namespaces{Defaults: set.defaults, Exempt: h.Exempt}.For(namespace, h.NamespaceLabels(ctx, namespace))
	return WithModes(ctx, modes), problems
}

// Get returns the current set (nil: no policies).
func (h *Holder) Get() *Set {
	if h == nil {
		return nil
	}
	return h.p.Load()
}

// Set replaces the current set.
func (h *Holder) Set(s *Set) { h.p.Store(s) }

// Wants reports whether any policy can match objects of this group and
// resource; callers skip converting objects no policy looks at.
func (s *Set) Wants(gvr schema.GroupVersionResource) bool {
	if s == nil {
		return false
	}
	for _, c := range s.policies {
		if c.match.wants(gvr) {
			return true
		}
	}
	return false
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == "*" || x == v {
			return true
		}
	}
	return false
}

// CheckAs checks v (a typed object, possibly without apiVersion and kind as
// read from a cache, or an apply configuration) as an object of kind gvk
// being created. Objects no policy looks at cost nothing.
func (s *Set) CheckAs(ctx context.Context, gvk schema.GroupVersionKind, v any) ([]Decision, error) {
	res, ok := resources[gvk.GroupKind()]
	if !ok {
		return nil, fmt.Errorf("policy: %s is not a kind policies check", gvk)
	}
	gvr := gvk.GroupVersion().WithResource(res)
	if !s.Wants(gvr) {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("policy: encoding %s: %w", gvk.Kind, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		// UnmarshalJSON needs a kind; set it and try again.
		m := map[string]any{}
		if jerr := json.Unmarshal(b, &m); jerr != nil {
			return nil, fmt.Errorf("policy: decoding %s: %w", gvk.Kind, jerr)
		}
		u.Object = m
	}
	u.SetGroupVersionKind(gvk)
	return s.Check(ctx, Object{GVR: gvr, Object: u}), nil
}

// Summary is one line for conditions and events: the first denial and how
// many more there are.
func Summary(ds []Decision) string {
	if len(ds) == 0 {
		return ""
	}
	d := ds[0]
	msg := fmt.Sprintf("%s: %s (policy %s)", d.Object, d.Message, d.Policy)
	if len(ds) > 1 {
		msg += fmt.Sprintf("; and %d more", len(ds)-1)
	}
	return msg
}
