package webhooks

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	sandboxv1alpha1 "github.com/agentsandbox/reconciler/api/v1alpha1"
	"github.com/agentsandbox/reconciler/tests/golden"
)

// review sends objects through the Converter as the API server would.
func review(t *testing.T, to string, objs ...[]byte) *apiextensionsv1.ConversionResponse {
	t.Helper()
	req := &apiextensionsv1.ConversionReview{Request: &apiextensionsv1.ConversionRequest{UID: "u", DesiredAPIVersion: to}}
	req.APIVersion, req.Kind = "apiextensions.k8s.io/v1", "ConversionReview"
	for _, o := range objs {
		req.Request.Objects = append(req.Request.Objects, runtime.RawExtension{Raw: o})
	}
	body, _ := json.Marshal(req)
	rec := httptest.NewRecorder()
	Converter{}.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, ConvertPath, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	out := &apiextensionsv1.ConversionReview{}
	if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
		t.Fatal(err)
	}
	return out.Response
}

// TestConversionGolden converts each golden/conversion case's v1alpha1
// object to v1beta1 (snapshotted) and back, which must give the input.
func TestConversionGolden(t *testing.T) {
	for _, c := range golden.Cases(t, "conversion") {
		t.Run(c.Name, func(t *testing.T) {
			in, err := yaml.YAMLToJSON(c.Read(t, "v1alpha1.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			resp := review(t, "agents.x-k8s.io/v1beta1", in)
			if resp.Result.Status != "Success" || len(resp.ConvertedObjects) != 1 {
				t.Fatalf("conversion failed: %+v", resp.Result)
			}
			var hub any
			if err := json.Unmarshal(resp.ConvertedObjects[0].Raw, &hub); err != nil {
				t.Fatal(err)
			}
			golden.AssertYAML(t, c.Path("v1beta1.yaml"), hub)

			// Back again gives the input (compared as typed objects, so
			// encoding details such as empty structs do not count).
			back := review(t, "agents.x-k8s.io/v1alpha1", resp.ConvertedObjects[0].Raw)
			var want, got sandboxv1alpha1.Sandbox
			if err := json.Unmarshal(in, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(back.ConvertedObjects[0].Raw, &got); err != nil {
				t.Fatal(err)
			}
			wy, _ := yaml.Marshal(want)
			gy, _ := yaml.Marshal(got)
			if string(wy) != string(gy) {
				t.Errorf("round trip is not lossless:\n%s", golden.Diff("v1alpha1.yaml", string(wy), string(gy)))
			}
		})
	}
}

func TestConversionRefusesUnknownPairs(t *testing.T) {
	resp := review(t, "agents.x-k8s.io/v2", []byte(`{"apiVersion":"agents.x-k8s.io/v1alpha1","kind":"Sandbox","metadata":{"name":"a"}}`))
	if resp.Result.Status != "Failure" || resp.ConvertedObjects != nil {
		t.Errorf("converting to an unknown version: %+v", resp.Result)
	}
}
