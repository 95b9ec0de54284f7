package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sdk "github.com/agentsandbox/reconciler/dataplane/client"
	"github.com/agentsandbox/reconciler/localcluster"
	"github.com/agentsandbox/reconciler/tests/cluster"
)

// TestStaleHandleFindsNotFound (issue 26): claim A takes the member of a
// pool of one and writes a private file; A's claim is deleted (as an
// expiry deletes it) and its Sandbox and Pod are gone; claim B takes the
// next member, and claim C the one the pool made after A's was gone. No
// claimed Sandbox ever has A's name, and A's handles (port-forward and
// router) and raw router requests with A's name (with and without its
// UID) get "not found", never B's or C's sandbox. (With names from the
// lowest free ordinal, C's Sandbox had A's name and A's handle read C's
// file.)
func TestStaleHandleFindsNotFound(t *testing.T) {
	if cluster.UseKind() {
		t.Skip("the stand-in kubelet serves the kwok cluster's fake Pods; kind runs them for real")
	}
	c := newClient(t)
	ns := namespace(t, c)
	sdkPool(t, c, ns, 1)
	r := startRouter(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sc, err := sdk.New(local.Config)
	if err != nil {
		t.Fatal(err)
	}

	a, err := sc.Create(ctx, ns, "pool")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close(context.Background()) }()
	aRouted, err := sc.Open(ctx, ns, a.Name(), sdk.WithRouter(r.URL))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = aRouted.Close(context.Background()) }()
	if err := a.Write(ctx, "secret.txt", strings.NewReader("A's secret\n")); err != nil {
		t.Fatal(err)
	}
	checkFile(ctx, t, aRouted, "secret.txt", "A's secret\n")
	aKey := types.NamespacedName{Namespace: ns, Name: a.Name()}
	aSandbox := &sandboxv1beta1.Sandbox{}
	if err := c.Get(ctx, aKey, aSandbox); err != nil {
		t.Fatal(err)
	}

	// A's claim goes, and with it (garbage collection) its Sandbox and Pod.
	claim := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: a.ClaimName()}}
	if err := c.Delete(ctx, claim, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "A's Sandbox and Pod gone", podAndSandboxGone(c, aKey))

	var others []*sdk.Sandbox
	for _, who := range []string{"B", "C"} {
		// A warm member to take (C's is the one made after A's was gone).
		waitFor(t, time.Minute, "a Ready pool member for claim "+who, readyMember(c, ns))
		sb, err := sc.Create(ctx, ns, "pool")
		if err != nil {
			t.Fatalf("claim %s: %v", who, err)
		}
		defer func() { _ = sb.Close(context.Background()) }()
		t.Logf("claim %s: Sandbox %s (A's was %s)", who, sb.Name(), a.Name())
		if sb.Name() == a.Name() {
			t.Errorf("claim %s got a Sandbox named %s, the name of A's deleted one", who, sb.Name())
		}
		if err := sb.Write(ctx, "secret.txt", strings.NewReader(who+"'s secret\n")); err != nil {
			t.Fatal(err)
		}
		others = append(others, sb)
	}

	for _, h := range []struct {
		name string
		sb   *sdk.Sandbox
	}{{"port-forward", a}, {"router", aRouted}} {
		rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
		rc, err := h.sb.Read(rctx, "secret.txt")
		rcancel()
		if err == nil {
			got, _ := io.ReadAll(rc)
			_ = rc.Close()
			t.Errorf("A's %s handle read %q after A was deleted", h.name, got)
		} else if !errors.Is(err, sdk.ErrNotFound) {
			t.Errorf("A's %s handle: %v; want ErrNotFound", h.name, err)
		}
	}
	for _, uid := range []types.UID{aSandbox.UID, ""} {
		code, body := routerGet(t, r, ns, a.Name(), uid, "/download/secret.txt")
		var detail struct{ Detail string }
		if code != http.StatusNotFound || json.Unmarshal([]byte(body), &detail) != nil || !strings.Contains(detail.Detail, "not found") {
			t.Errorf("GET /download/secret.txt for %s (X-Sandbox-UID %q) through the router: %d %s; want 404 {\"detail\": \"... not found.\"}", a.Name(), uid, code, body)
		}
	}
	for _, sb := range others {
		checkFile(ctx, t, sb, "secret.txt", map[bool]string{true: "B's secret\n", false: "C's secret\n"}[sb == others[0]])
	}
}

// readyMember reports a Ready Sandbox that a warm pool of ns controls.
func readyMember(c client.Client, ns string) func() error {
	return func() error {
		var list sandboxv1beta1.SandboxList
		if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, sb := range list.Items {
			ref := metav1.GetControllerOf(&sb)
			if ref == nil || ref.Kind != "SandboxWarmPool" || sb.DeletionTimestamp != nil {
				continue
			}
			for _, cond := range sb.Status.Conditions {
				if cond.Type == sandboxv1beta1.ConditionReady && cond.Status == metav1.ConditionTrue {
					return nil
				}
			}
		}
		return errors.New("no Ready pool member")
	}
}

// podAndSandboxGone reports a Sandbox and its Pod (of its name) gone.
func podAndSandboxGone(c client.Client, key types.NamespacedName) func() error {
	return func() error {
		if err := gone(c, key, &sandboxv1beta1.Sandbox{})(); err != nil {
			return err
		}
		return gone(c, key, &corev1.Pod{})()
	}
}

// routerGet sends GET path through the router to the Sandbox name in ns,
// pinned to uid when it is set, as upstream's SDKs address it.
func routerGet(t *testing.T, r *localcluster.Router, ns, name string, uid types.UID, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(r.URL, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Sandbox-ID", name)
	req.Header.Set("X-Sandbox-Namespace", ns)
	req.Header.Set("X-Sandbox-Port", "8888")
	if uid != "" {
		req.Header.Set("X-Sandbox-UID", string(uid))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
