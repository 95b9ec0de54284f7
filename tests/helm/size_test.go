package helm

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"testing"
)

// TestReleaseFitsInASecret: Helm stores a release (the whole chart, its
// files base64-encoded, and the rendered manifest) as base64(gzip(JSON)) in
// one Secret, whose data may not exceed 1 MiB. Indented YAML CRDs once
// pushed it over ("Secret ... is invalid: data: Too long"); this keeps a
// margin for the CRDs to grow.
func TestReleaseFitsInASecret(t *testing.T) {
	rel, err := template(t.Context(), Namespace, values(t,
		"controller.extensions=true,router.enabled=true,admissionPolicies.enabled=true,policyModeLabels.enabled=true,"+
			"monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(rel)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	size := len(base64.StdEncoding.EncodeToString(buf.Bytes()))
	const limit, margin = 1 << 20, 0.95
	t.Logf("release record: %d bytes (%.0f%% of a Secret's 1 MiB)", size, 100*float64(size)/limit)
	if float64(size) > margin*limit {
		t.Errorf("the release record takes %d bytes, over %.0f%% of a Secret's 1 MiB: shrink the chart", size, 100*margin)
	}
}
