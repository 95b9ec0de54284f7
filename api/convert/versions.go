package convert

import (
	"bytes"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	extv1alpha1 "github.com/agentsandbox/reconciler/api/extensions/v1alpha1"
	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1alpha1 "github.com/agentsandbox/reconciler/api/v1alpha1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// decoder decodes one object's JSON into a typed value.
type decoder func(raw []byte, into any) error

// converter decodes one object at one apiVersion and returns it at another.
type converter func(raw []byte, decode decoder) (any, error)

// conversion is a converter from In to Out through conv.
func conversion[In, Out any](conv func(*In) *Out) converter {
	return func(raw []byte, decode decoder) (any, error) {
		in := new(In)
		if err := decode(raw, in); err != nil {
			return nil, err
		}
		return conv(in), nil
	}
}

// conversions are keyed by kind, from apiVersion and to apiVersion.
var conversions = map[[3]string]converter{
	key("Sandbox", sandboxv1alpha1.GroupVersion, sandboxv1beta1.GroupVersion): conversion((*sandboxv1alpha1.Sandbox).ToV1beta1),
	key("Sandbox", sandboxv1beta1.GroupVersion, sandboxv1alpha1.GroupVersion): conversion(sandboxv1alpha1.SandboxFromV1beta1),
	key("SandboxTemplate", extv1alpha1.GroupVersion, extv1beta1.GroupVersion): conversion((*extv1alpha1.SandboxTemplate).ToV1beta1),
	key("SandboxTemplate", extv1beta1.GroupVersion, extv1alpha1.GroupVersion): conversion(extv1alpha1.TemplateFromV1beta1),
	key("SandboxClaim", extv1alpha1.GroupVersion, extv1beta1.GroupVersion):    conversion((*extv1alpha1.SandboxClaim).ToV1beta1),
	key("SandboxClaim", extv1beta1.GroupVersion, extv1alpha1.GroupVersion):    conversion(extv1alpha1.ClaimFromV1beta1),
	key("SandboxWarmPool", extv1alpha1.GroupVersion, extv1beta1.GroupVersion): conversion((*extv1alpha1.SandboxWarmPool).ToV1beta1),
	key("SandboxWarmPool", extv1beta1.GroupVersion, extv1alpha1.GroupVersion): conversion(extv1alpha1.PoolFromV1beta1),
}

func key(kind string, from, to schema.GroupVersion) [3]string {
	return [3]string{kind, from.String(), to.String()}
}

// Object is a typed object of ours.
type Object interface {
	metav1.Object
	runtime.Object
}

// NewHub returns a new, empty object of kind at the hub version (Hub), or
// nil when kind is not one of ours.
func NewHub(kind string) Object {
	switch kind {
	case "Sandbox":
		return &sandboxv1beta1.Sandbox{}
	case "SandboxTemplate":
		return &extv1beta1.SandboxTemplate{}
	case "SandboxWarmPool":
		return &extv1beta1.SandboxWarmPool{}
	case "SandboxClaim":
		return &extv1beta1.SandboxClaim{}
	}
	return nil
}

// Hub is the version every kind of ours is stored and rendered at:
// v1beta1 of its group.
func Hub(kind string) schema.GroupVersion {
	if kind == "Sandbox" {
		return sandboxv1beta1.GroupVersion
	}
	return extv1beta1.GroupVersion
}

// Known says whether kind converts between the apiVersions from and to.
func Known(kind, from, to string) bool {
	_, ok := conversions[[3]string{kind, from, to}]
	return ok
}

// Between decodes raw, the JSON of a kind at apiVersion from, and returns
// it as a typed object at apiVersion to, as the API server's conversion
// webhook would. Unknown fields are dropped, as the API server prunes them.
func Between(kind, from, to string, raw []byte) (any, error) {
	return between(kind, from, to, raw, json.Unmarshal)
}

// BetweenStrict is Between refusing fields the kind at apiVersion from
// does not have (for manifests read from files, where a typo is the
// user's to fix).
func BetweenStrict(kind, from, to string, raw []byte) (any, error) {
	return between(kind, from, to, raw, func(raw []byte, into any) error {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		return d.Decode(into)
	})
}

func between(kind, from, to string, raw []byte, decode decoder) (any, error) {
	conv := conversions[[3]string{kind, from, to}]
	if conv == nil {
		return nil, fmt.Errorf("no conversion for %s from %s to %s", kind, from, to)
	}
	out, err := conv(raw, decode)
	if err != nil {
		return nil, fmt.Errorf("converting %s from %s to %s: %w", kind, from, to, err)
	}
	return out, nil
}
