package webhooks

import (
	"encoding/json"
	"fmt"
	"net/http"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/agentsandbox/reconciler/api/convert"
)

// ConvertPath is where the API server sends ConversionReviews for our CRDs.
const ConvertPath = "/convert"

// Converter serves CRD conversion between v1alpha1 and v1beta1 with the
// conversions of api/convert.
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
		converted, err := convert.Between(meta.Kind, meta.APIVersion, to, o.Raw)
		if err != nil {
			return nil, err
		}
		raw, err := json.Marshal(converted)
		if err != nil {
			return nil, err
		}
		out = append(out, runtime.RawExtension{Raw: raw})
	}
	return out, nil
}
