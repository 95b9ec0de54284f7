package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// resources maps the kinds we check to their resources.
var resources = map[schema.GroupKind]string{
	{Group: "", Kind: "Pod"}:                                         "pods",
	{Group: "", Kind: "Service"}:                                     "services",
	{Group: "", Kind: "PersistentVolumeClaim"}:                       "persistentvolumeclaims",
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}:              "networkpolicies",
	{Group: "agents.x-k8s.io", Kind: "Sandbox"}:                      "sandboxes",
	{Group: "extensions.agents.x-k8s.io", Kind: "SandboxTemplate"}:   "sandboxtemplates",
	{Group: "extensions.agents.x-k8s.io", Kind: "SandboxClaim"}:      "sandboxclaims",
	{Group: "extensions.agents.x-k8s.io", Kind: "SandboxWarmPool"}:   "sandboxwarmpools",
}

// ObjectOf turns a typed object or an apply configuration (anything that
// marshals to a Kubernetes object with apiVersion and kind) into an Object
// to check.
func ObjectOf(v any) (Object, error) {
	var u *unstructured.Unstructured
	switch t := v.(type) {
	case *unstructured.Unstructured:
		u = t
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return Object{}, fmt.Errorf("policy: encoding %T: %w", v, err)
		}
		u = &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(b); err != nil {
			return Object{}, fmt.Errorf("policy: decoding %T: %w", v, err)
		}
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
