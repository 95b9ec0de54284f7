package webhooks

import (
	"encoding/json"
	"fmt"
	"net/http"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	extv1alpha1 "github.com/agentsandbox/reconciler/api/extensions/v1alpha1"
	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1alpha1 "github.com/agentsandbox/reconciler/api/v1alpha1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// ConvertPath is where the API server sends ConversionReviews for our CRDs.
const ConvertPath = "/convert"

// converter converts one object between two apiVersions of its kind.
type converter func(raw []byte) (any, error)

// conversions are keyed by kind, from apiVersion and to apiVersion.
var conversions = map[[3]string]converter{
	{"Sandbox", sandboxv1alpha1.GroupVersion.String(), sandboxv1beta1.GroupVersion.String()}: func(raw []byte) (any, error) {
		in := &sandboxv1alpha1.Sandbox{}
		if err := json.Unmarshal(raw, in); err != nil {
			return nil, err
		}
		return in.ToV1beta1(), nil
	},
	{"Sandbox", sandboxv1beta1.GroupVersion.String(), sandboxv1alpha1.GroupVersion.String()}: func(raw []byte) (any, error) {
		in := &sandboxv1beta1.Sandbox{}
		if err := json.Unmarshal(raw, in); err != nil {
			return nil, err
		}
		return sandboxv1alpha1.SandboxFromV1beta1(in), nil
	},
	{"SandboxTemplate", extv1alpha1.GroupVersion.String(), extv1beta1.GroupVersion.String()}: func(raw []byte) (any, error) {
		in := &extv1alpha1.SandboxTemplate{}
		return decodeThen(raw, in, func() any { return in.ToV1beta1() })
	},
	{"SandboxTemplate", extv1beta1.GroupVersion.String(), extv1alpha1.GroupVersion.String()}: func(raw []byte) (any, error) {
		in := &extv1beta1.SandboxTemplate{}
		return decodeThen(raw, in, func() any { return extv1alpha1.TemplateFromV1beta1(in) })
	},
	{"SandboxClaim", extv1alpha1.GroupVersion.String(), extv1beta1.GroupVersion.String()}: func(raw []byte) (any, error) {
		in := &extv1alpha1.SandboxClaim{}
		return decodeThen(raw, in, func() any { return in.ToV1beta1() })
	},
	{"SandboxClaim", extv1beta1.GroupVersion.String(), extv1alpha1.GroupVersion.String()}: func(raw []byte) (any, error) {
		in := &extv1beta1.SandboxClaim{}
		return decodeThen(raw, in, func() any { return extv1alpha1.ClaimFromV1beta1(in) })
	},
	{"SandboxWarmPool", extv1alpha1.GroupVersion.String(), extv1beta1.GroupVersion.String()}: func(raw []byte) (any, error) {
		in := &extv1alpha1.SandboxWarmPool{}
		return decodeThen(raw, in, func() any { return in.ToV1beta1() })
	},
	{"SandboxWarmPool", extv1beta1.GroupVersion.String(), extv1alpha1.GroupVersion.String()}: func(raw []byte) (any, error) {
		in := &extv1beta1.SandboxWarmPool{}
		return decodeThen(raw, in, func() any { return extv1alpha1.PoolFromV1beta1(in) })
	},
}

func decodeThen(raw []byte, into any, convert func() any) (any, error) {
	if err := json.Unmarshal(raw, into); err != nil {
		return nil, err
	}
	return convert(), nil
}

// Converter serves CRD conversion between v1alpha1 and v1beta1 with the
// pure conversion functions of api/.
type Converter struct{}

// ServeHTTP implements http.Handler for ConversionReview (apiextensions/v1).
func (Converter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r, MaxConversionBodyBytes)
	if err != nil {
		writeBodyError(w, err)
		return
	}
	review := &apiextensionsv1.ConversionReview{}
	if err := json.Unmarshal(body, review); err != nil || review.Request == nil {
		http.Error(w, "expected a ConversionReview with a request", http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID}
	resp.ConvertedObjects, err = convertAll(review.Request.Objects, review.Request.DesiredAPIVersion)
	if err != nil {
		resp.ConvertedObjects = nil
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
	} else {
		resp.Result = metav1.Status{Status: metav1.StatusSuccess}
	}
	out := &apiextensionsv1.ConversionReview{TypeMeta: review.TypeMeta, Response: resp}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func convertAll(objs []runtime.RawExtension, to string) ([]runtime.RawExtension, error) {
	out := make([]runtime.RawExtension, 0, len(objs))
	for _, o := range objs {
		var meta metav1.TypeMeta
		if err := json.Unmarshal(o.Raw, &meta); err != nil {
			return nil, fmt.Errorf("decoding an object to convert: %w", err)
		}
		if meta.APIVersion == to {
			out = append(out, runtime.RawExtension{Raw: o.Raw})
			continue
		}
		conv := conversions[[3]string{meta.Kind, meta.APIVersion, to}]
		if conv == nil {
			return nil, fmt.Errorf("no conversion for %s from %s to %s", meta.Kind, meta.APIVersion, to)
		}
		converted, err := conv(o.Raw)
		if err != nil {
			return nil, fmt.Errorf("converting %s from %s to %s: %w", meta.Kind, meta.APIVersion, to, err)
		}
		raw, err := json.Marshal(converted)
		if err != nil {
			return nil, err
		}
		out = append(out, runtime.RawExtension{Raw: raw})
	}
	return out, nil
}
