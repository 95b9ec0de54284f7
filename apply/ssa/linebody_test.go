package ssa

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// TestApplyBodiesByLine sends requests through the wrapped transport to a
// server that records what arrives: only a JSON apply patch is re-lined,
// into the same document, with a Content-Length that matches it.
func TestApplyBodiesByLine(t *testing.T) {
	type got struct {
		body   string
		length string
	}
	arrived := make(chan got, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		arrived <- got{body: string(b), length: r.Header.Get("Content-Length")}
	}))
	defer srv.Close()
	hc := &http.Client{Transport: ApplyBodiesByLine(http.DefaultTransport)}

	const doc = `{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"Sandbox","metadata":{"name":"a","labels":{"k":"v: w, x"}},"spec":{"n":[1,2.5,true,null,"line\nbreak"]}}`
	for _, tc := range []struct {
		name, method, contentType, body string
		lined                           bool
	}{
		{name: "apply of JSON", method: http.MethodPatch, contentType: "application/apply-patch+yaml", body: doc, lined: true},
		{name: "apply with parameters", method: http.MethodPatch, contentType: "application/apply-patch+yaml; charset=utf-8", body: doc, lined: true},
		{name: "apply of YAML", method: http.MethodPatch, contentType: "application/apply-patch+yaml", body: "kind: Sandbox\nmetadata:\n  name: a\n"},
		{name: "apply of invalid JSON", method: http.MethodPatch, contentType: "application/apply-patch+yaml", body: `{"kind":`},
		{name: "merge patch", method: http.MethodPatch, contentType: "application/merge-patch+json", body: doc},
		{name: "create", method: http.MethodPost, contentType: "application/json", body: doc},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", tc.contentType)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			g := <-arrived
			if g.length != strconv.Itoa(len(g.body)) {
				t.Errorf("Content-Length %s for a body of %d bytes", g.length, len(g.body))
			}
			if !tc.lined {
				if g.body != tc.body {
					t.Errorf("body changed:\n%s\nwant\n%s", g.body, tc.body)
				}
				return
			}
			if lines := strings.Count(g.body, "\n"); lines < 10 {
				t.Errorf("apply body has %d line breaks, want one per member:\n%s", lines, g.body)
			}
			if strings.Contains(g.body, "\n ") || strings.Contains(g.body, "\t") {
				t.Errorf("apply body is indented:\n%s", g.body)
			}
			var sent, want any
			if err := json.Unmarshal([]byte(g.body), &sent); err != nil {
				t.Fatalf("apply body is not JSON: %v\n%s", err, g.body)
			}
			_ = json.Unmarshal([]byte(doc), &want)
			a, _ := json.Marshal(sent)
			b, _ := json.Marshal(want)
			if !bytes.Equal(a, b) {
				t.Errorf("apply body is another document:\n%s\nwant\n%s", a, b)
			}
		})
	}
}
