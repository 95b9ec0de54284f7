package client

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// fakeCluster is an API server holding one Sandbox (and its Pod, of the
// same name) in namespace team-a, as resume on connect sees it:
//
//   - agents.x-k8s.io/v1beta1 sandboxes: GET of the Sandbox, PATCH (recorded;
//     spec.operatingMode and annotations applied, the metadata.uid
//     precondition checked) and watches by metadata.name from a
//     resourceVersion, as newline-delimited MODIFIED events;
//   - v1 pods: GET, list and watch of the Pod (what the port-forward's follow
//     reads), and pods/portforward, passed to a fakeAPIServer (which forwards
//     port 8888 to a fakeRuntime) only while the Pod exists: 404 otherwise,
//     as an API server answers for a Pod that is gone;
//   - anything else (SandboxClaims included): 404.
//
// A PATCH that sets a Suspended Sandbox Running brings its Pod back after
// readyDelay, then sets Ready=True, as the controller would.
type fakeCluster struct {
	t          *testing.T
	name       string
	uid        types.UID
	rt         *fakeRuntime
	pf         *fakeAPIServer
	srv        *httptest.Server
	proxy      *httputil.ReverseProxy
	readyDelay time.Duration
	done       chan struct{}

	mu        sync.Mutex
	rv        int
	sb        sandboxv1beta1.Sandbox
	history   []sandboxv1beta1.Sandbox // every version, for watches
	podUID    types.UID                // "" while there is no Pod
	podN      int
	podEvents []podEvent
	changed   chan struct{} // closed, and replaced, at every change
	patches   []applyPatch
	watches   []url.Values // sandbox watch queries
	gets      int          // GETs of the Sandbox
	// what the port-forward's follow did: pod watches open now, the
	// resourceVersions it watched from, and lists made after a change
	podWatchers int
	podWatchRVs []int
	podListRVs  []int
	gone404     int           // port-forwards refused: no Pod
	gate        chan struct{} // if set, PATCHes wait until it is closed
}

type podEvent struct {
	typ string
	uid types.UID
	rv  int
}

// applyPatch is one PATCH the fake received.
type applyPatch struct {
	contentType, fieldManager, force string
	body                             map[string]any
}

func (p applyPatch) meta() map[string]any {
	m, _ := p.body["metadata"].(map[string]any)
	return m
}

func (p applyPatch) spec() map[string]any {
	m, _ := p.body["spec"].(map[string]any)
	return m
}

func (p applyPatch) annotations() map[string]any {
	m, _ := p.meta()["annotations"].(map[string]any)
	return m
}

const (
	sandboxesPath = "/apis/agents.x-k8s.io/v1beta1/namespaces/team-a/sandboxes"
	podsPath      = "/api/v1/namespaces/team-a/pods"
)

// newFakeCluster serves the Sandbox name, Running and Ready (its Pod
// there) or Suspended (no Pod), with the given annotations.
func newFakeCluster(t *testing.T, name string, annotations map[string]string, suspended bool) *fakeCluster {
	t.Helper()
	rt, runtimeSrv := newFakeRuntime(t)
	return newFakeClusterPorts(t, name, annotations, suspended, rt, map[string]string{"8888": runtimeSrv.Listener.Addr().String()})
}

// newFakeClusterPorts is newFakeCluster whose Pod's ports forward to
// targets (port -> address); rt, if any, is the fake runtime behind them.
func newFakeClusterPorts(t *testing.T, name string, annotations map[string]string, suspended bool,
	rt *fakeRuntime, targets map[string]string) *fakeCluster {
	t.Helper()
	pf, pfSrv := newFakeAPIServerPorts(t, name, targets)
	target, _ := url.Parse(pfSrv.URL)
	f := &fakeCluster{
		t: t, name: name, uid: types.UID("uid-" + name), rt: rt, pf: pf,
		proxy:      httputil.NewSingleHostReverseProxy(target),
		readyDelay: 100 * time.Millisecond,
		done:       make(chan struct{}),
		changed:    make(chan struct{}),
	}
	f.proxy.ErrorLog = log.New(io.Discard, "", 0)
	f.sb = sandboxv1beta1.Sandbox{
		TypeMeta: metav1.TypeMeta{APIVersion: sandboxv1beta1.GroupVersion.String(), Kind: "Sandbox"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "team-a", UID: f.uid, Generation: 1, Annotations: annotations,
			CreationTimestamp: metav1.Now(),
		},
	}
	if suspended {
		f.setModeLocked(sandboxv1beta1.SandboxOperatingModeSuspended)
	} else {
		f.sb.Spec.OperatingMode = sandboxv1beta1.SandboxOperatingModeRunning
		f.podUpLocked()
	}
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	t.Cleanup(func() { close(f.done) }) // before Close: ends the watches
	return f
}

// client is a Client of this API server, with quick retries.
func (f *fakeCluster) client(t *testing.T, opts ...Option) *Client {
	t.Helper()
	c, err := New(&rest.Config{Host: f.srv.URL}, append([]Option{fast}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// open opens a handle on the Sandbox with a Client of its own.
func (f *fakeCluster) open(t *testing.T, opts ...Option) *Sandbox {
	t.Helper()
	sb, err := f.client(t).Open(ctxFor(t), "team-a", f.name, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	return sb
}

// bumpLocked stores the Sandbox's current state as a new version.
func (f *fakeCluster) bumpLocked() {
	f.rv++
	f.sb.ResourceVersion = strconv.Itoa(f.rv)
	f.history = append(f.history, *f.sb.DeepCopy())
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeCluster) setReadyLocked(status metav1.ConditionStatus, reason string) {
	conds := []metav1.Condition{{Type: sandboxv1beta1.ConditionReady, Status: status, Reason: reason,
		ObservedGeneration: f.sb.Generation, LastTransitionTime: metav1.Now()}}
	f.sb.Status.Conditions = conds
}

// setModeLocked suspends the Sandbox (and deletes its Pod), or sets it
// Running (Ready only once podUpLocked).
func (f *fakeCluster) setModeLocked(mode sandboxv1beta1.SandboxOperatingMode) {
	f.sb.Spec.OperatingMode = mode
	f.sb.Generation++
	if mode == sandboxv1beta1.SandboxOperatingModeSuspended {
		if f.podUID != "" {
			f.rv++
			f.podEvents = append(f.podEvents, podEvent{"DELETED", f.podUID, f.rv})
			f.podUID = ""
		}
		f.setReadyLocked(metav1.ConditionFalse, sandboxv1beta1.ReasonSandboxSuspended)
	} else {
		f.setReadyLocked(metav1.ConditionFalse, sandboxv1beta1.ReasonDependenciesNotReady)
	}
	f.bumpLocked()
}

// podUpLocked starts a new Pod and sets the Sandbox Ready.
func (f *fakeCluster) podUpLocked() {
	f.podN++
	f.podUID = types.UID(f.name + "-pod-" + strconv.Itoa(f.podN))
	f.rv++
	f.podEvents = append(f.podEvents, podEvent{"ADDED", f.podUID, f.rv})
	f.setReadyLocked(metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady)
	f.bumpLocked()
}

// suspend suspends the Sandbox as the controller does: its Pod is deleted
// and every port-forward to it ends. It returns once the handles' port-
// forward has seen the Pod go (a pod list, or a pod watch from the
// deletion on, made after it), so that no call goes to the old connection.
func (f *fakeCluster) suspend(t *testing.T) {
	t.Helper()
	eventually(t, "the port-forward to follow the Pod", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.podWatchers > 0
	})
	f.mu.Lock()
	f.setModeLocked(sandboxv1beta1.SandboxOperatingModeSuspended)
	deleted := f.podEvents[len(f.podEvents)-1].rv
	f.mu.Unlock()
	f.pf.drop()
	eventually(t, "the port-forward to see the Pod go", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, rv := range append(append([]int(nil), f.podWatchRVs...), f.podListRVs...) {
			if rv >= deleted {
				return true
			}
		}
		return false
	})
}

// holdPatches makes PATCHes wait until the returned function is called.
func (f *fakeCluster) holdPatches() (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	gate := make(chan struct{})
	f.gate = gate
	var once sync.Once
	return func() { once.Do(func() { close(gate) }) }
}

func (f *fakeCluster) recordedPatches() []applyPatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]applyPatch(nil), f.patches...)
}

// patchesBy is the PATCHes made under one field manager.
func (f *fakeCluster) patchesBy(manager string) []applyPatch {
	var out []applyPatch
	for _, p := range f.recordedPatches() {
		if p.fieldManager == manager {
			out = append(out, p)
		}
	}
	return out
}

func (f *fakeCluster) sandboxWatches() []url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]url.Values(nil), f.watches...)
}

func (f *fakeCluster) sandboxGets() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets
}

func (f *fakeCluster) podLists() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.podListRVs)
}

func (f *fakeCluster) refusedPortForwards() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gone404
}

// executes is how many commands reached the runtime.
func (f *fakeCluster) executes() int {
	n := 0
	for _, r := range f.rt.recorded() {
		if r.method == http.MethodPost && r.rawPath == "/execute" {
			n++
		}
	}
	return n
}

func (f *fakeCluster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, q := r.URL.Path, r.URL.Query()
	switch {
	case p == sandboxesPath && q.Get("watch") == "true":
		f.watchSandbox(w, r)
	case p == sandboxesPath+"/"+f.name && r.Method == http.MethodGet:
		f.mu.Lock()
		f.gets++
		sb := f.sb.DeepCopy()
		f.mu.Unlock()
		writeJSON(w, http.StatusOK, sb)
	case p == sandboxesPath+"/"+f.name && r.Method == http.MethodPatch:
		f.patch(w, r)
	case p == podsPath+"/"+f.name+"/portforward":
		f.mu.Lock()
		up := f.podUID != ""
		if !up {
			f.gone404++
		}
		f.mu.Unlock()
		if !up {
			notFound(w, "pods", f.name)
			return
		}
		f.proxy.ServeHTTP(w, r)
	case p == podsPath+"/"+f.name && r.Method == http.MethodGet:
		f.mu.Lock()
		uid, rv := f.podUID, f.rv
		f.mu.Unlock()
		if uid == "" {
			notFound(w, "pods", f.name)
			return
		}
		writeJSON(w, http.StatusOK, f.pod(uid, rv))
	case p == podsPath && q.Get("watch") == "true":
		f.watchPod(w, r)
	case p == podsPath && r.Method == http.MethodGet:
		f.mu.Lock()
		uid, rv := f.podUID, f.rv
		f.podListRVs = append(f.podListRVs, rv)
		f.mu.Unlock()
		items := []any{}
		if uid != "" && q.Get("fieldSelector") == "metadata.name="+f.name {
			items = append(items, f.pod(uid, rv))
		}
		writeJSON(w, http.StatusOK, map[string]any{"apiVersion": "v1", "kind": "PodList",
			"metadata": map[string]any{"resourceVersion": strconv.Itoa(rv)}, "items": items})
	default:
		notFound(w, "", p)
	}
}

func notFound(w http.ResponseWriter, kind, name string) {
	writeJSON(w, http.StatusNotFound, map[string]any{"apiVersion": "v1", "kind": "Status", "status": "Failure",
		"reason": "NotFound", "message": kind + " " + strconv.Quote(name) + " not found", "code": 404,
		"details": map[string]any{"name": name, "kind": kind}})
}

func (f *fakeCluster) pod(uid types.UID, rv int) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{
		"name": f.name, "namespace": "team-a", "uid": string(uid), "resourceVersion": strconv.Itoa(rv),
		"ownerReferences": []any{map[string]any{"apiVersion": sandboxv1beta1.GroupVersion.String(), "kind": "Sandbox",
			"name": f.name, "uid": string(f.uid), "controller": true}}}}
}

// patch records a server-side apply and applies what it sets.
func (f *fakeCluster) patch(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec := applyPatch{contentType: r.Header.Get("Content-Type"),
		fieldManager: r.URL.Query().Get("fieldManager"), force: r.URL.Query().Get("force")}
	if err := json.Unmarshal(body, &rec.body); err != nil {
		f.t.Errorf("PATCH body is not JSON: %v: %q", err, body)
	}
	f.mu.Lock()
	f.patches = append(f.patches, rec)
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if uid, _ := rec.meta()["uid"].(string); uid != "" && types.UID(uid) != f.sb.UID {
		writeJSON(w, http.StatusConflict, map[string]any{"apiVersion": "v1", "kind": "Status", "status": "Failure",
			"reason": "Conflict", "message": "Precondition failed: UID in precondition: " + uid, "code": 409})
		return
	}
	for k, v := range rec.annotations() {
		if f.sb.Annotations == nil {
			f.sb.Annotations = map[string]string{}
		}
		f.sb.Annotations[k], _ = v.(string)
	}
	mode, _ := rec.spec()["operatingMode"].(string)
	resumed := false
	switch m := sandboxv1beta1.SandboxOperatingMode(mode); {
	case m == sandboxv1beta1.SandboxOperatingModeRunning && f.sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended:
		f.setModeLocked(m)
		resumed = true
	case m != "" && m != f.sb.Spec.OperatingMode:
		f.setModeLocked(m)
	default:
		f.bumpLocked()
	}
	writeJSON(w, http.StatusOK, f.sb.DeepCopy())
	if resumed {
		time.AfterFunc(f.readyDelay, func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeRunning && f.podUID == "" {
				f.podUpLocked()
			}
		})
	}
}

// watchSandbox streams the Sandbox's versions after the resourceVersion
// asked for, until the client or the test goes.
func (f *fakeCluster) watchSandbox(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f.mu.Lock()
	f.watches = append(f.watches, q)
	f.mu.Unlock()
	if q.Get("fieldSelector") != "metadata.name="+f.name {
		f.t.Errorf("sandbox watch without the name's field selector: %v", q)
	}
	from, _ := strconv.Atoi(q.Get("resourceVersion"))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	enc := json.NewEncoder(w)
	for {
		f.mu.Lock()
		var events []sandboxv1beta1.Sandbox
		for _, v := range f.history {
			if rv, _ := strconv.Atoi(v.ResourceVersion); rv > from {
				events = append(events, v)
				from = rv
			}
		}
		changed := f.changed
		f.mu.Unlock()
		for _, v := range events {
			if err := enc.Encode(map[string]any{"type": "MODIFIED", "object": v}); err != nil {
				return
			}
		}
		w.(http.Flusher).Flush()
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		case <-f.done:
			return
		}
	}
}

// watchPod streams the Pod's events after the resourceVersion asked for,
// and ends the watch after sending any (the client watches again).
func (f *fakeCluster) watchPod(w http.ResponseWriter, r *http.Request) {
	from, _ := strconv.Atoi(r.URL.Query().Get("resourceVersion"))
	f.mu.Lock()
	f.podWatchRVs = append(f.podWatchRVs, from)
	f.podWatchers++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.podWatchers--
		f.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	for {
		f.mu.Lock()
		var events []podEvent
		for _, e := range f.podEvents {
			if e.rv > from {
				events = append(events, e)
			}
		}
		changed := f.changed
		f.mu.Unlock()
		if len(events) > 0 {
			enc := json.NewEncoder(w)
			for _, e := range events {
				_ = enc.Encode(map[string]any{"type": e.typ, "object": f.pod(e.uid, e.rv)})
			}
			return
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		case <-f.done:
			return
		}
	}
}

// eventually waits up to 10s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
