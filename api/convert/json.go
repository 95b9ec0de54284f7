package convert

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// JSON copies from into to through their JSON encoding: a typed object into
// its apply configuration or back, or any two types that share a wire
// format. Fields of from that to does not have are dropped.
func JSON(from, to any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return fmt.Errorf("encoding %T: %w", from, err)
	}
	if err := json.Unmarshal(b, to); err != nil {
		return fmt.Errorf("decoding %T into %T: %w", from, to, err)
	}
	return nil
}

// Unstructured is v, a typed object or an apply configuration (anything
// that encodes to a Kubernetes object with apiVersion and kind), as an
// unstructured object, its numbers decoded as the API server does; an
// unstructured object is returned as it is.
func Unstructured(v any) (*unstructured.Unstructured, error) {
	if u, ok := v.(*unstructured.Unstructured); ok {
		return u, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", v, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("decoding %T: %w", v, err)
	}
	return u, nil
}
