package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests/cluster"
)

// replayTraceparent is a W3C trace context, as upstream's SDKs send with
// tracing on.
const replayTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestSDKReplayUpstreamRequests replays, as raw HTTP, the requests
// upstream's Python and Go SDKs send to upstream's router (paths, the
// X-Sandbox-* headers, X-Request-ID and traceparent, the multipart upload
// with field "file", percent-encoded paths) against our router and the
// runtime the stand-in kubelet runs for a claimed Sandbox, and checks the
// status codes and JSON shapes of /shared/DATAPLANE.md: the runtime's
// answers, and the router's own for an unknown Sandbox (404) and an
// unclaimed warm pool member (403).
func TestSDKReplayUpstreamRequests(t *testing.T) {
	if cluster.UseKind() {
		t.Skip("the stand-in kubelet serves the kwok cluster's fake Pods; kind runs them for real")
	}
	c := newClient(t)
	ns := namespace(t, c)
	sdkPool(t, c, ns, 2)
	r := startRouter(t)
	ctx := context.Background()
	claim := e2eClaim(ns, "replay", "pool", func(cl *extv1beta1.SandboxClaim) {
		cl.Annotations = map[string]string{extv1beta1.AnnotationClientFirstRequestedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	})
	if err := c.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "claim Ready", claimReady(c, ns, "replay"))
	if err := c.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
		t.Fatal(err)
	}
	id := claim.Status.Sandbox.Name
	rp := replayer{t: t, url: r.URL, ns: ns}

	// The router's own health.
	if code, body := rp.do(http.MethodGet, "/healthz", "", "", nil); code != http.StatusOK || body != `{"status":"ok"}` {
		t.Errorf("GET /healthz = %d %s", code, body)
	}
	// The runtime's health, then the legacy protocol's calls. The first
	// request may beat the runtime's start (kwok marks Pods Ready at once).
	waitFor(t, time.Minute, "GET / through the router", func() error { return rp.expect(http.MethodGet, "/", id, http.StatusOK) })
	var exec map[string]any
	rp.json(http.MethodPost, "/execute", id, "application/json", []byte(`{"command": "echo hi"}`), http.StatusOK, &exec)
	rp.keys(exec, "stdout", "stderr", "exit_code")
	if exec["stdout"] != "hi\n" || exec["stderr"] != "" || exec["exit_code"] != float64(0) {
		t.Errorf("POST /execute echo hi = %v", exec)
	}
	rp.json(http.MethodPost, "/execute", id, "application/json", []byte(`{"command": "false"}`), http.StatusOK, &exec)
	if exec["exit_code"] != float64(1) {
		t.Errorf("POST /execute false = %v; want exit_code 1", exec)
	}

	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	part, _ := mw.CreateFormFile("file", "data.txt")
	_, _ = io.WriteString(part, "replayed\n")
	_ = mw.Close()
	if code, body := rp.do(http.MethodPost, "/upload", id, mw.FormDataContentType(), form.Bytes()); code != http.StatusOK {
		t.Fatalf("POST /upload = %d %s", code, body)
	}
	for _, cmd := range []string{"mkdir -p sub", "cp data.txt sub/data.txt"} {
		rp.json(http.MethodPost, "/execute", id, "application/json", []byte(`{"command": "`+cmd+`"}`), http.StatusOK, &exec)
		if exec["exit_code"] != float64(0) {
			t.Fatalf("POST /execute %s = %v", cmd, exec)
		}
	}
	if code, body := rp.do(http.MethodGet, "/download/sub%2Fdata.txt", id, "", nil); code != http.StatusOK || body != "replayed\n" {
		t.Errorf("GET /download/sub%%2Fdata.txt = %d %q", code, body)
	}
	var list []map[string]any
	rp.json(http.MethodGet, "/list/sub", id, "", nil, http.StatusOK, &list)
	if len(list) != 1 {
		t.Fatalf("GET /list/sub = %v; want one entry", list)
	}
	rp.keys(list[0], "name", "size", "type", "mod_time")
	if _, isFloat := list[0]["mod_time"].(float64); list[0]["name"] != "data.txt" || list[0]["size"] != float64(9) || list[0]["type"] != "file" || !isFloat {
		t.Errorf("GET /list/sub entry = %v", list[0])
	}
	var exists map[string]any
	rp.json(http.MethodGet, "/exists/sub%2Fdata.txt", id, "", nil, http.StatusOK, &exists)
	rp.keys(exists, "path", "exists")
	if exists["exists"] != true {
		t.Errorf("GET /exists/sub%%2Fdata.txt = %v", exists)
	}
	rp.json(http.MethodGet, "/exists/sub%2Fmissing.txt", id, "", nil, http.StatusOK, &exists)
	if exists["exists"] != false {
		t.Errorf("GET /exists/sub%%2Fmissing.txt = %v", exists)
	}
	var denied map[string]any
	rp.json(http.MethodGet, "/download/..%2F..%2Fescape.txt", id, "", nil, http.StatusForbidden, &denied)
	if denied["message"] != "Access denied" {
		t.Errorf("GET /download/..%%2F..%%2Fescape.txt = %v", denied)
	}

	// The router's refusals, in upstream's {"detail": ...} shape.
	var detail map[string]any
	rp.json(http.MethodGet, "/", "", "", nil, http.StatusBadRequest, &detail)
	rp.keys(detail, "detail")
	rp.json(http.MethodGet, "/", "no-such-sandbox", "", nil, http.StatusNotFound, &detail)
	rp.keys(detail, "detail")
	warm := unclaimedMember(t, c, ns, id)
	rp.json(http.MethodGet, "/", warm, "", nil, http.StatusForbidden, &detail)
	rp.keys(detail, "detail")
}

// unclaimedMember is a Sandbox of ns's pool other than claimed.
func unclaimedMember(t *testing.T, c client.Client, ns, claimed string) string {
	t.Helper()
	var name string
	waitFor(t, time.Minute, "an unclaimed pool member", func() error {
		var list sandboxv1beta1.SandboxList
		if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, sb := range list.Items {
			if ref := metav1.GetControllerOf(&sb); sb.Name != claimed && ref != nil && ref.Kind == "SandboxWarmPool" {
				name = sb.Name
				return nil
			}
		}
		return context.DeadlineExceeded
	})
	return name
}

// replayer sends requests shaped like upstream's SDKs' to a router.
type replayer struct {
	t       *testing.T
	url, ns string
	n       int
}

func (rp *replayer) request(method, path, id, contentType string, body []byte) (*http.Response, error) {
	rp.n++
	req, err := http.NewRequest(method, rp.url+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if id != "" {
		req.Header.Set("X-Sandbox-ID", id)
		req.Header.Set("X-Sandbox-Namespace", rp.ns)
		req.Header.Set("X-Sandbox-Port", "8888")
	}
	req.Header.Set("X-Request-ID", fmt.Sprintf("replay-%s-%d", rp.ns, rp.n))
	req.Header.Set("traceparent", replayTraceparent)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err == nil && id != "" && resp.Header.Get("X-Request-ID") != req.Header.Get("X-Request-ID") { // proxied requests
		rp.t.Errorf("%s %s: X-Request-ID %q came back as %q", method, path, req.Header.Get("X-Request-ID"), resp.Header.Get("X-Request-ID"))
	}
	return resp, err
}

func (rp *replayer) do(method, path, id, contentType string, body []byte) (int, string) {
	rp.t.Helper()
	resp, err := rp.request(method, path, id, contentType, body)
	if err != nil {
		rp.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(resp.Body)
	rp.t.Logf("%s %s (X-Sandbox-ID %q): %d %s", method, path, id, resp.StatusCode, bytes.TrimSpace(data))
	return resp.StatusCode, string(data)
}

func (rp *replayer) expect(method, path, id string, code int) error {
	resp, err := rp.request(method, path, id, "", nil)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != code {
		data, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s", resp.Status, data)
	}
	return nil
}

// json sends a request, wants code and a JSON body, and decodes it into v.
func (rp *replayer) json(method, path, id, contentType string, body []byte, code int, v any) {
	rp.t.Helper()
	got, data := rp.do(method, path, id, contentType, body)
	if got != code {
		rp.t.Fatalf("%s %s: %d %s; want %d", method, path, got, data, code)
	}
	if err := json.Unmarshal([]byte(data), v); err != nil {
		rp.t.Fatalf("%s %s: not JSON: %v: %s", method, path, err, data)
	}
}

// keys checks that a JSON object has exactly these keys.
func (rp *replayer) keys(obj map[string]any, want ...string) {
	rp.t.Helper()
	var got []string
	for k := range obj {
		got = append(got, k)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		rp.t.Errorf("JSON keys %v; want %v (%v)", got, want, obj)
	}
}
