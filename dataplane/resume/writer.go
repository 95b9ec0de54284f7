package resume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// Key names one Sandbox: its namespace, name and UID.
type Key struct {
	Namespace, Name string
	UID             types.UID
}

func (k Key) String() string { return k.Namespace + "/" + k.Name }

// Writer makes the two writes of this package to Sandboxes.
type Writer struct {
	// REST reaches agents.x-k8s.io/v1beta1 (NewREST makes one).
	REST rest.Interface
}

// NewREST returns a REST client for agents.x-k8s.io/v1beta1 on cfg,
// sharing hc (nil: one of its own).
func NewREST(cfg *rest.Config, hc *http.Client) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	gv := sandboxv1beta1.GroupVersion
	c.GroupVersion, c.APIPath = &gv, "/apis"
	s := runtime.NewScheme()
	if err := sandboxv1beta1.AddToScheme(s); err != nil {
		return nil, err
	}
	c.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
	if hc == nil {
		return rest.RESTClientFor(c)
	}
	return rest.RESTClientForConfigAndClient(c, hc)
}

// applyBody is a Sandbox apply configuration naming one object by UID.
func applyBody(k Key, annotations map[string]string, spec map[string]any) ([]byte, error) {
	meta := map[string]any{"name": k.Name, "namespace": k.Namespace}
	if k.UID != "" {
		meta["uid"] = string(k.UID) // a precondition: never the namesake
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	obj := map[string]any{
		"apiVersion": sandboxv1beta1.GroupVersion.String(),
		"kind":       "Sandbox",
		"metadata":   meta,
	}
	if spec != nil {
		obj["spec"] = spec
	}
	return json.Marshal(obj)
}

func (w *Writer) apply(ctx context.Context, k Key, manager string, body []byte) error {
	return w.REST.Patch(types.ApplyPatchType).
		Namespace(k.Namespace).Resource("sandboxes").Name(k.Name).
		VersionedParams(&metav1.PatchOptions{FieldManager: manager, Force: ptr.To(true)}, metav1.ParameterCodec).
		Body(body).Do(ctx).Error()
}

// SetRunning sets the Sandbox's spec.operatingMode to Running, taking the
// field from whoever set it Suspended (FieldManagerOperatingMode, forced).
func (w *Writer) SetRunning(ctx context.Context, k Key) error {
	body, err := applyBody(k, nil, map[string]any{"operatingMode": string(sandboxv1beta1.SandboxOperatingModeRunning)})
	if err != nil {
		return err
	}
	if err := w.apply(ctx, k, sandboxv1beta1.FieldManagerOperatingMode, body); err != nil {
		return fmt.Errorf("resuming sandbox %s: %w", k, err)
	}
	return nil
}

// ReportActivity sets the Sandbox's last-activity annotation to at
// (FieldManagerActivity).
func (w *Writer) ReportActivity(ctx context.Context, k Key, at time.Time) error {
	body, err := applyBody(k, map[string]string{sandboxv1beta1.AnnotationLastActivity: FormatTime(at)}, nil)
	if err != nil {
		return err
	}
	if err := w.apply(ctx, k, sandboxv1beta1.FieldManagerActivity, body); err != nil {
		return fmt.Errorf("reporting activity of sandbox %s: %w", k, err)
	}
	return nil
}

// FormatTime is how the last-activity annotation spells a time (RFC 3339,
// UTC, whole seconds: finer would only make more writes differ), rounded
// up, so that an idle timeout is never cut short by the rounding.
func FormatTime(t time.Time) string {
	s := t.UTC().Truncate(time.Second)
	if s.Before(t) {
		s = s.Add(time.Second)
	}
	return s.Format(time.RFC3339)
}

// IsGone reports an error of a write of this package meaning the Sandbox
// it was meant for is no more: not found, deleted (the API server answers
// Conflict: "uid mismatch ... no existing object was found"), or replaced
// by a namesake (Invalid: metadata.uid is immutable).
func IsGone(err error) bool {
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return true
	}
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}
