package router

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	routerconfig "github.com/agentsandbox/reconciler/config/router"
	"github.com/agentsandbox/reconciler/dataplane/e2b"
	"github.com/agentsandbox/reconciler/dataplane/resume"
)

type created struct {
	SandboxID, TemplateID, ClientID, EnvdVersion, EnvdAccessToken string
	Domain                                                        *string
}

type listed struct {
	SandboxID, TemplateID, State, StartedAt, EndAt string
	Metadata                                       map[string]string
}

func createPool(t *testing.T, ns, name, template string) {
	t.Helper()
	p := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To[int32](0), TemplateRef: extv1beta1.SandboxTemplateRef{Name: template}}}
	if err := env.Client.Create(ctxFor(t), p); err != nil {
		t.Fatal(err)
	}
}

func getClaim(t *testing.T, ns, name string) *extv1beta1.SandboxClaim {
	t.Helper()
	c := &extv1beta1.SandboxClaim{}
	if err := env.Client.Get(ctxFor(t), types.NamespacedName{Namespace: ns, Name: name}, c); err != nil {
		t.Fatal(err)
	}
	return c
}

// e2bSetup: two tenants (namespaces a and b, each with a pool "python"
// and a ServiceAccount allowed the E2B calls there), the stand-in
// controller in both, and the router with the E2B API as its deployed
// identity (config/router RBAC, the e2b component's, and its admission
// policy).
func e2bSetup(t *testing.T) (url, nsA, keyA, nsB, keyB string) {
	nsA, nsB = env.Namespace(t), env.Namespace(t)
	identity := routerIdentity(t, nsA)
	grantE2B(t, nsA)
	policy, err := routerconfig.AdmissionPolicyE2B()
	if err != nil {
		t.Fatal(err)
	}
	installRouterPolicy(t, nsA, string(policy))
	all := []string{"create", "get", "list", "update", "delete"}
	keyA = e2bUser(t, nsA, "agent", all, true)
	keyB = e2bUser(t, nsB, "agent", all, true)
	for _, ns := range []string{nsA, nsB} {
		createPool(t, ns, "python", "python-template")
		standInController(t, ns)
	}
	keyNS := env.Namespace(t)
	grantKeys(t, nsA, keyNS)
	// The key "e2b_key-of-a" acts as user e2b:a in nsA (bound to the
	// role of a's agent); an unlabelled Secret's key counts for nothing.
	for name, key := range map[string]string{"key-a": "e2b_key-of-a", "unlabelled": "e2b_unlabelled"} {
		sum := sha256.Sum256([]byte(key))
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: keyNS, Name: name},
			StringData: map[string]string{e2b.KeyDataHash: hex.EncodeToString(sum[:]), e2b.KeyDataNamespace: nsA, e2b.KeyDataUsername: "e2b:a"}}
		if name == "key-a" {
			sec.Labels = map[string]string{e2b.LabelAPIKey: "true"}
		}
		if err := env.Client.Create(ctxFor(t), sec); err != nil {
			t.Fatal(err)
		}
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "e2b-a"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "agent"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "e2b:a"}}}
	if err := env.Client.Create(ctxFor(t), rb); err != nil {
		t.Fatal(err)
	}
	return startE2B(t, identity, keyNS), nsA, keyA, nsB, keyB
}

// TestE2BKeySecrets: a key kept in a labelled Secret acts as the identity
// and in the namespace the Secret names; an unlabelled Secret's key and a
// made-up key do not authenticate.
func TestE2BKeySecrets(t *testing.T) {
	base, nsA, _, _, _ := e2bSetup(t)
	status, body, _ := e2bCall(t, "POST", base+"/v2/sandboxes", `{"templateID":"python"}`, map[string]string{"X-API-KEY": "e2b_key-of-a"})
	if status != http.StatusCreated || !strings.HasPrefix(decode[created](t, body).SandboxID, nsA+"--") {
		t.Fatalf("create with a Secret's key: %d %s", status, body)
	}
	for _, key := range []string{"e2b_unlabelled", "e2b_key-of-b", "e2b_key-of-ax", "E2B_KEY-OF-A"} {
		status, body, _ = e2bCall(t, "GET", base+"/v2/sandboxes", "", map[string]string{"X-API-KEY": key})
		if status != http.StatusUnauthorized {
			t.Errorf("key %q: %d %s", key, status, body)
		}
	}
}

// TestE2BSandboxLifecycle drives the API with raw requests shaped as the
// E2B SDK sends them: create, the data plane (streamed, credentials
// stripped), getInfo, list with the double-encoded metadata filter and
// paging, setTimeout, pause (twice: 409), the data plane while paused,
// connect, kill (twice: 404).
func TestE2BSandboxLifecycle(t *testing.T) {
	base, nsA, keyA, _, _ := e2bSetup(t)
	release := make(chan struct{})
	port := e2bBackend(t, release)
	api := map[string]string{"X-API-KEY": keyA}

	start := time.Now()
	status, body, _ := e2bCall(t, "POST", base+"/v2/sandboxes",
		`{"templateID":"python","timeout":120,"metadata":{"user":"a b","team":"red"},"envVars":{"FOO":"bar"},"autoResume":{"enabled":false}}`, api)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, body)
	}
	sb := decode[created](t, body)
	if !strings.HasPrefix(sb.SandboxID, nsA+"--") || sb.TemplateID != "python" || sb.ClientID == "" || sb.EnvdVersion != e2b.DefaultEnvdVersion ||
		sb.EnvdAccessToken == "" || sb.Domain != nil || !strings.Contains(body, `"domain":null`) {
		t.Fatalf("create answered %s", body)
	}
	_, claimName, err := e2b.ParseID(sb.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	claim := getClaim(t, nsA, claimName)
	end := claim.Spec.Lifecycle.ShutdownTime.Time
	if claim.Spec.WarmPoolRef.Name != "python" || claim.Spec.Lifecycle.ShutdownPolicy != extv1beta1.ShutdownPolicyDelete ||
		end.Before(start.Add(118*time.Second)) || end.After(time.Now().Add(121*time.Second)) {
		t.Errorf("claim spec %+v, lifecycle %+v", claim.Spec, claim.Spec.Lifecycle)
	}
	if len(claim.Spec.Env) != 1 || claim.Spec.Env[0].Name != "FOO" || claim.Spec.Env[0].Value != "bar" {
		t.Errorf("claim env %+v", claim.Spec.Env)
	}
	if claim.Labels[e2b.MetadataLabelPrefix+"team"] != "red" || claim.Labels[e2b.MetadataLabelPrefix+"user"] != "" {
		t.Errorf("claim labels %v (user's value has a space: annotation only)", claim.Labels)
	}

	// The data plane: to the Pod, the credentials left behind.
	data := map[string]string{e2b.HeaderSandboxID: sb.SandboxID, e2b.HeaderSandboxPort: port,
		e2b.HeaderAccessToken: sb.EnvdAccessToken, "X-API-KEY": keyA, "Authorization": "Basic dXNlcjo="}
	status, body, _ = e2bCall(t, "POST", base+"/process.Process/List", `{}`, data)
	if status != http.StatusOK || body != "sandbox saw /process.Process/List token= key= auth=" {
		t.Errorf("data plane: %d %s", status, body)
	}
	// Streamed unbuffered: the first line arrives while the sandbox holds
	// the second back.
	req, _ := http.NewRequestWithContext(ctxFor(t), http.MethodPost, base+"/stream", strings.NewReader("{}"))
	for k, v := range data {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if line := firstLine(t, resp, 10*time.Second); line != "first\n" {
		t.Errorf("streamed %q", line)
	}
	close(release)
	_ = resp.Body.Close()

	// getInfo and list.
	status, body, _ = e2bCall(t, "GET", base+"/sandboxes/"+sb.SandboxID, "", api)
	info := decode[map[string]any](t, body)
	if status != http.StatusOK || info["state"] != "running" || info["envdAccessToken"] != sb.EnvdAccessToken || info["endAt"] == "" {
		t.Errorf("getInfo: %d %s", status, body)
	}
	status, body, _ = e2bCall(t, "POST", base+"/v2/sandboxes", `{"templateID":"python-template","metadata":{"user":"c"}}`, api)
	if status != http.StatusCreated {
		t.Fatalf("create by template name: %d %s", status, body)
	}
	second := decode[created](t, body)
	// {user: 'a b'} as the SDK encodes it.
	status, body, _ = e2bCall(t, "GET", base+"/v2/sandboxes?metadata=user%3Da%252520b&state=running,paused", "", api)
	if l := decode[[]listed](t, body); status != http.StatusOK || len(l) != 1 || l[0].SandboxID != sb.SandboxID || l[0].Metadata["team"] != "red" {
		t.Errorf("list by metadata: %d %s", status, body)
	}
	status, body, hdr := e2bCall(t, "GET", base+"/v2/sandboxes?limit=1", "", api)
	next := hdr.Get("X-Next-Token")
	if l := decode[[]listed](t, body); status != http.StatusOK || len(l) != 1 || next == "" {
		t.Fatalf("list page 1: %d %s next %q", status, body, next)
	}
	status, body, hdr = e2bCall(t, "GET", base+"/v2/sandboxes?limit=1&nextToken="+url.QueryEscape(next), "", api)
	if l := decode[[]listed](t, body); status != http.StatusOK || len(l) != 1 || hdr.Get("X-Next-Token") != "" {
		t.Errorf("list page 2: %d %s next %q", status, body, hdr.Get("X-Next-Token"))
	}

	// setTimeout moves the shutdown time (earlier too).
	if status, body, _ = e2bCall(t, "POST", base+"/sandboxes/"+sb.SandboxID+"/timeout", `{"timeout":30}`, api); status != http.StatusNoContent {
		t.Errorf("setTimeout: %d %s", status, body)
	}
	if end := getClaim(t, nsA, claimName).Spec.Lifecycle.ShutdownTime.Time; end.After(time.Now().Add(31 * time.Second)) {
		t.Errorf("setTimeout left the shutdown time at %s", end)
	}

	// pause, then pause again, the data plane while paused, connect.
	if status, body, _ = e2bCall(t, "POST", base+"/sandboxes/"+sb.SandboxID+"/pause", "", api); status != http.StatusNoContent {
		t.Fatalf("pause: %d %s", status, body)
	}
	if got := getSandbox(t, nsA, claimName); got.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeSuspended {
		t.Errorf("after pause the Sandbox is %s", got.Spec.OperatingMode)
	}
	status, body, _ = e2bCall(t, "POST", base+"/sandboxes/"+sb.SandboxID+"/pause", "", api)
	if status != http.StatusConflict || decode[map[string]any](t, body)["code"] != float64(409) {
		t.Errorf("second pause: %d %s", status, body)
	}
	status, body, _ = e2bCall(t, "GET", base+"/sandboxes/"+sb.SandboxID, "", api)
	if decode[map[string]any](t, body)["state"] != "paused" {
		t.Errorf("getInfo while paused: %d %s", status, body)
	}
	if status, body, _ = e2bCall(t, "POST", base+"/files", "", data); status != http.StatusConflict {
		t.Errorf("data plane while paused (no autoResume): %d %s", status, body)
	}
	status, body, _ = e2bCall(t, "POST", base+"/v2/sandboxes/"+sb.SandboxID+"/connect", `{"timeout":600}`, api)
	if status != http.StatusCreated || decode[created](t, body).EnvdAccessToken != sb.EnvdAccessToken {
		t.Fatalf("connect: %d %s", status, body)
	}
	if end := getClaim(t, nsA, claimName).Spec.Lifecycle.ShutdownTime.Time; end.Before(time.Now().Add(590 * time.Second)) {
		t.Errorf("connect left the shutdown time at %s", end)
	}
	if status, body, _ = e2bCall(t, "POST", base+"/process.Process/List", `{}`, data); status != http.StatusOK {
		t.Errorf("data plane after connect: %d %s", status, body)
	}
	if status, _, _ = e2bCall(t, "POST", base+"/v2/sandboxes/"+sb.SandboxID+"/connect", `{}`, api); status != http.StatusOK {
		t.Errorf("connect to a running sandbox: %d", status)
	}
	if status, body, _ = e2bCall(t, "GET", base+"/sandboxes/"+sb.SandboxID+"/metrics", "", api); status != http.StatusOK || body != "[]" {
		t.Errorf("metrics: %d %s", status, body)
	}

	// kill, guarded by the UID; then 404 in E2B's shape.
	for _, id := range []string{sb.SandboxID, second.SandboxID} {
		if status, body, _ = e2bCall(t, "DELETE", base+"/sandboxes/"+id, "", api); status != http.StatusNoContent {
			t.Errorf("kill %s: %d %s", id, status, body)
		}
	}
	status, body, _ = e2bCall(t, "DELETE", base+"/sandboxes/"+sb.SandboxID, "", api)
	if status != http.StatusNotFound || decode[map[string]any](t, body)["code"] != float64(404) {
		t.Errorf("second kill: %d %s", status, body)
	}
	waitUntil(t, 10*time.Second, "the data plane refuses the killed sandbox", func() bool {
		status, _, _ = e2bCall(t, "POST", base+"/process.Process/List", `{}`, data)
		return status == http.StatusNotFound
	})
}

// TestE2BAutoResume: a sandbox created with autoResume is resumed by a
// data-plane request; the request is then served.
func TestE2BAutoResume(t *testing.T) {
	base, _, keyA, _, _ := e2bSetup(t)
	port := e2bBackend(t, nil)
	api := map[string]string{"X-API-KEY": keyA}
	status, body, _ := e2bCall(t, "POST", base+"/v2/sandboxes", `{"templateID":"python","autoResume":{"enabled":true}}`, api)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, body)
	}
	sb := decode[created](t, body)
	if status, body, _ = e2bCall(t, "POST", base+"/sandboxes/"+sb.SandboxID+"/pause", "", api); status != http.StatusNoContent {
		t.Fatalf("pause: %d %s", status, body)
	}
	data := map[string]string{e2b.HeaderSandboxID: sb.SandboxID, e2b.HeaderSandboxPort: port, e2b.HeaderAccessToken: sb.EnvdAccessToken}
	if status, body, _ = e2bCall(t, "GET", base+"/health", "", data); status != http.StatusOK {
		t.Errorf("data plane to a paused autoResume sandbox: %d %s", status, body)
	}
}

// TestE2BRefusals plays the attacker: wrong, missing and foreign
// credentials, another tenant's IDs, forged IDs and paths, a claim not
// made through the API, a caller without exec, unsupported options.
func TestE2BRefusals(t *testing.T) {
	base, nsA, keyA, nsB, keyB := e2bSetup(t)
	port := e2bBackend(t, nil)
	apiA, apiB := map[string]string{"X-API-KEY": keyA}, map[string]string{"X-API-KEY": keyB}

	status, body, _ := e2bCall(t, "POST", base+"/v2/sandboxes", `{"templateID":"python"}`, apiA)
	if status != http.StatusCreated {
		t.Fatalf("create in a: %d %s", status, body)
	}
	a := decode[created](t, body)
	status, body, _ = e2bCall(t, "POST", base+"/v2/sandboxes", `{"templateID":"python"}`, apiB)
	if status != http.StatusCreated || !strings.HasPrefix(decode[created](t, body).SandboxID, nsB+"--") {
		t.Fatalf("create in b: %d %s", status, body)
	}
	b := decode[created](t, body)

	// Control plane: no key, a made-up key, tenant b on a's sandbox.
	for name, h := range map[string]map[string]string{"no key": nil, "made-up key": {"X-API-KEY": "e2b_123"}} {
		status, body, _ = e2bCall(t, "GET", base+"/sandboxes/"+a.SandboxID, "", h)
		if status != http.StatusUnauthorized || decode[map[string]any](t, body)["code"] != float64(401) {
			t.Errorf("%s: %d %s", name, status, body)
		}
	}
	for _, call := range [][2]string{{"GET", ""}, {"DELETE", ""}, {"POST", "/pause"}, {"POST", "/timeout"}, {"GET", "/metrics"}} {
		status, body, _ = e2bCall(t, call[0], base+"/sandboxes/"+a.SandboxID+call[1], `{"timeout":10}`, apiB)
		if status != http.StatusNotFound {
			t.Errorf("tenant b: %s %s: %d %s", call[0], call[1], status, body)
		}
	}
	if status, body, _ = e2bCall(t, "POST", base+"/v2/sandboxes/"+a.SandboxID+"/connect", `{}`, apiB); status != http.StatusNotFound {
		t.Errorf("tenant b connects to a's sandbox: %d %s", status, body)
	}
	if status, body, _ = e2bCall(t, "GET", base+"/v2/sandboxes", "", apiB); strings.Contains(body, a.SandboxID) || status != http.StatusOK {
		t.Errorf("tenant b's list shows a's sandbox: %d %s", status, body)
	}
	// Forged IDs and paths.
	for _, id := range []string{"..%2F..%2Fapis", nsA + "--..", nsA + "%2Fe2b-x", "default--abcdefghijkl", strings.ToUpper(a.SandboxID)} {
		if status, body, _ = e2bCall(t, "GET", base+"/sandboxes/"+id, "", apiA); status != http.StatusNotFound {
			t.Errorf("GET /sandboxes/%s: %d %s", id, status, body)
		}
	}
	// A claim in a's namespace with an E2B-shaped name, not made through
	// the API: not a sandbox of the API.
	plain := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "e2b-aaaaaaaaaaaa"},
		Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "python"}}}
	if err := env.Client.Create(ctxFor(t), plain); err != nil {
		t.Fatal(err)
	}
	plainID := nsA + "--aaaaaaaaaaaa"
	if status, body, _ = e2bCall(t, "DELETE", base+"/sandboxes/"+plainID, "", apiA); status != http.StatusNotFound {
		t.Errorf("kill of a claim not made through the API: %d %s", status, body)
	}

	// Data plane: missing token, b's token on a's ID, forged IDs, the
	// plain claim.
	dp := func(id, token string) (int, string) {
		h := map[string]string{e2b.HeaderSandboxID: id, e2b.HeaderSandboxPort: port}
		if token != "" {
			h[e2b.HeaderAccessToken] = token
		}
		s, body, _ := e2bCall(t, "POST", base+"/process.Process/List", `{}`, h)
		return s, body
	}
	if s, body := dp(a.SandboxID, ""); s != http.StatusUnauthorized {
		t.Errorf("no access token: %d %s", s, body)
	}
	if s, body := dp(a.SandboxID, b.EnvdAccessToken); s != http.StatusUnauthorized {
		t.Errorf("b's token on a's sandbox: %d %s", s, body)
	}
	if s, body := dp(a.SandboxID, a.EnvdAccessToken+"x"); s != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d %s", s, body)
	}
	for _, id := range []string{"../" + a.SandboxID, nsA + "/e2b-x", "x"} {
		if s, body := dp(id, a.EnvdAccessToken); s != http.StatusBadRequest {
			t.Errorf("forged ID %q: %d %s", id, s, body)
		}
	}
	if s, body := dp(plainID, a.EnvdAccessToken); s != http.StatusNotFound {
		t.Errorf("the plain claim through the data plane: %d %s", s, body)
	}
	if s, body := dp(a.SandboxID, a.EnvdAccessToken); s != http.StatusOK {
		t.Errorf("the right token: %d %s", s, body)
	}

	// A caller who may read claims but not exec gets no access token.
	reader := e2bUser(t, nsA, "reader", []string{"get", "list"}, false)
	if status, body, _ = e2bCall(t, "GET", base+"/sandboxes/"+a.SandboxID, "", map[string]string{"X-API-KEY": reader}); status != http.StatusForbidden || strings.Contains(body, a.EnvdAccessToken) {
		t.Errorf("getInfo without exec: %d %s", status, body)
	}
	if status, body, _ = e2bCall(t, "POST", base+"/v2/sandboxes", `{"templateID":"python"}`, map[string]string{"X-API-KEY": reader}); status != http.StatusForbidden {
		t.Errorf("create without the right: %d %s", status, body)
	}

	// Unknown templates, unsupported options, bad bodies.
	for _, req := range []string{`{"templateID":"nope"}`, `{"templateID":"python","autoPause":true}`, `{"templateID":"python","timeout":0}`,
		`{"templateID":"../x"}`, `{"templateID":"python","envVars":{"A=B":"c"}}`, `{`} {
		status, body, _ = e2bCall(t, "POST", base+"/v2/sandboxes", req, apiA)
		if status != http.StatusBadRequest && status != http.StatusNotFound {
			t.Errorf("create %s: %d %s", req, status, body)
		}
	}
}

// TestE2BPolicyPausesOnlyClaimedSandboxes: with the E2B component's
// admission policy, the router's ServiceAccount may set Suspended on a
// Sandbox a SandboxClaim controls, and still not on any other.
func TestE2BPolicyPausesOnlyClaimedSandboxes(t *testing.T) {
	ns := env.Namespace(t)
	identity := routerIdentity(t, ns)
	policy, err := routerconfig.AdmissionPolicyE2B()
	if err != nil {
		t.Fatal(err)
	}
	installRouterPolicy(t, ns, string(policy))
	rc, err := resume.NewREST(identity, nil)
	if err != nil {
		t.Fatal(err)
	}
	suspendAs := func(sb *sandboxv1beta1.Sandbox) error {
		body := fmt.Sprintf(`{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"Sandbox","metadata":{"name":%q,"namespace":%q,"uid":%q},"spec":{"operatingMode":"Suspended"}}`, sb.Name, sb.Namespace, sb.UID)
		return rc.Patch(types.ApplyPatchType).Namespace(sb.Namespace).Resource("sandboxes").Name(sb.Name).
			VersionedParams(&metav1.PatchOptions{FieldManager: sandboxv1beta1.FieldManagerOperatingMode, Force: ptr.To(true)}, metav1.ParameterCodec).
			Body([]byte(body)).Do(ctxFor(t)).Error()
	}
	standalone := createSandbox(t, ns, "standalone", nil, nil, nil)
	claimed := createSandbox(t, ns, "claimed", &metav1.OwnerReference{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxClaim",
		Name: "c", UID: "c-uid", Controller: ptr.To(true)}, nil, nil)
	waitUntil(t, 20*time.Second, "the policy refuses Suspended on a standalone Sandbox", func() bool {
		// Running again first (as admin), so each probe is a change.
		_ = env.Client.Patch(ctxFor(t), getSandbox(t, ns, "standalone"), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"operatingMode":"Running"}}`)))
		err := suspendAs(standalone)
		return err != nil && strings.Contains(err.Error(), "or to Suspended on a Sandbox a SandboxClaim controls")
	})
	if err := suspendAs(claimed); err != nil {
		t.Errorf("pause of a claimed Sandbox refused: %v", err)
	}
	if got := getSandbox(t, ns, "claimed"); got.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeSuspended {
		t.Errorf("claimed Sandbox is %s", got.Spec.OperatingMode)
	}
}
