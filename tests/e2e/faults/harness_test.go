package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// storageClass names the static PVs the scenarios pre-create (the local
// cluster has no provisioner).
const storageClass = "faults-static"

func newClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(local.Config, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func namespace(t *testing.T, c client.Client, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	// The API server refuses Pods in a namespace whose "default"
	// ServiceAccount the controller manager has not made yet; a user who
	// applies a burst into a brand-new namespace sees those refusals (and
	// our retries) too, but the scenarios measure the controller, so they
	// start once the namespace is usable, as the Kubernetes e2e framework
	// does.
	waitFor(t, 2*time.Minute, "the default ServiceAccount in "+name, func() error {
		return c.Get(context.Background(), client.ObjectKey{Namespace: name, Name: "default"}, &corev1.ServiceAccount{})
	})
	return ns.Name
}

// startController runs the built binary as cluster admin with the
// extensions and without the webhook (the scenarios test the controller);
// extra flags come last.
func startController(t *testing.T, name string, extra ...string) *tests.Controller {
	t.Helper()
	logPath := filepath.Join(workdir, fmt.Sprintf("%s-%s-%d.log", strings.ReplaceAll(t.Name(), "/", "_"), name, time.Now().UnixNano()))
	level := "info"
	if os.Getenv("FAULTS_VERBOSE") != "" {
		level = "debug" // every change the controller applies, for a failure's post-mortem
	}
	args := append([]string{"--extensions", "--enable-webhook=false", "--controller-namespace", "agent-sandbox-system",
		"--zap-log-level=" + level}, extra...)
	c, err := tests.StartController(controller, local.Kubeconfig, logPath, args...)
	if err != nil {
		t.Fatalf("starting controller %s: %v", name, err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

// The suites' shared object builders.
var (
	sandbox  = tests.Sandbox
	template = tests.Template
	pool     = tests.WarmPool
)

// withHome gives the Sandbox a PVC "home" and pre-creates a PV for it.
func withHome(t *testing.T, c client.Client) func(*sandboxv1beta1.Sandbox) {
	return func(sb *sandboxv1beta1.Sandbox) {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: sb.Namespace + "-" + sb.Name},
			Spec: corev1.PersistentVolumeSpec{
				StorageClassName:              storageClass,
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + sb.Name}},
				// Bind to exactly this Sandbox's claim.
				ClaimRef: &corev1.ObjectReference{Namespace: sb.Namespace, Name: "home-" + sb.Name},
			},
		}
		if err := c.Create(context.Background(), pv); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), pv) })
		sb.Spec.VolumeClaimTemplates = []sandboxv1beta1.PersistentVolumeClaimTemplate{{
			EmbeddedObjectMetadata: sandboxv1beta1.EmbeddedObjectMetadata{Name: "home"},
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: ptr.To(storageClass),
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}}
		sb.Spec.PodTemplate.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "home", MountPath: "/home/agent"}}
	}
}

func claim(ns, name, poolName string) *extv1beta1.SandboxClaim {
	return tests.Claim(ns, name, poolName)
}

// burst is a workload: Sandboxes (every tenth with a PVC), a template, a
// warm pool and claims on it.
type burst struct {
	ns                string
	sandboxes, claims int
	pool              int32
}

// objects builds the burst's objects (creating the PVs the PVC-backed
// Sandboxes bind to): template and pool first, then Sandboxes with the
// claims spread among them.
func (b burst) objects(t *testing.T, c client.Client) []client.Object {
	t.Helper()
	var objs []client.Object
	if b.claims > 0 || b.pool > 0 {
		objs = append(objs, template(b.ns, "tmpl"), pool(b.ns, "pool", "tmpl", b.pool))
	}
	every := max(1, b.sandboxes/max(1, b.claims))
	made := 0
	for i := range b.sandboxes {
		var mut []func(*sandboxv1beta1.Sandbox)
		if i%10 == 0 {
			mut = append(mut, withHome(t, c))
		}
		objs = append(objs, sandbox(b.ns, fmt.Sprintf("sb-%04d", i), mut...))
		if i%every == 0 && made < b.claims {
			objs = append(objs, claim(b.ns, fmt.Sprintf("claim-%03d", made), "pool"))
			made++
		}
	}
	for ; made < b.claims; made++ {
		objs = append(objs, claim(b.ns, fmt.Sprintf("claim-%03d", made), "pool"))
	}
	return objs
}

// send creates objs with 16 writers. A create that fails because the API
// server is away is retried for up to two minutes; AlreadyExists after a
// retry means the first attempt landed.
func send(c client.Client, objs []client.Object) error {
	ctx := context.Background()
	return parallelErr(16, len(objs), func(i int) error {
		deadline := time.Now().Add(2 * time.Minute)
		for attempt := 0; ; attempt++ {
			err := c.Create(ctx, objs[i].DeepCopyObject().(client.Object))
			switch {
			case err == nil, attempt > 0 && apierrors.IsAlreadyExists(err):
				return nil
			case apierrors.IsInvalid(err) || apierrors.IsAlreadyExists(err) || apierrors.IsForbidden(err) || time.Now().After(deadline):
				return fmt.Errorf("creating %T %s: %w", objs[i], objs[i].GetName(), err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	})
}

// parallelErr runs f(0..n-1) on workers goroutines and returns the
// errors joined.
func parallelErr(workers, n int, f func(i int) error) error {
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan error, n)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// converged reports nil once every Sandbox that should run is Ready, every
// claim is Ready and the pool (if any) is full and Ready.
func converged(c client.Client, ns string) func() error {
	return func() error {
		ctx := context.Background()
		var sbs sandboxv1beta1.SandboxList
		if err := c.List(ctx, &sbs, client.InNamespace(ns)); err != nil {
			return err
		}
		notReady := 0
		example := ""
		for i := range sbs.Items {
			sb := &sbs.Items[i]
			if sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended || sb.DeletionTimestamp != nil {
				continue
			}
			if !meta.IsStatusConditionTrue(sb.Status.Conditions, sandboxv1beta1.ConditionReady) {
				notReady++
				if example == "" {
					example = sb.Name
					if cond := meta.FindStatusCondition(sb.Status.Conditions, sandboxv1beta1.ConditionReady); cond != nil {
						example += fmt.Sprintf(" Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
					} else {
						example += " without a Ready condition"
					}
				}
			}
		}
		var claims extv1beta1.SandboxClaimList
		if err := c.List(ctx, &claims, client.InNamespace(ns)); err != nil {
			return err
		}
		claimsNotReady := 0
		for i := range claims.Items {
			if !meta.IsStatusConditionTrue(claims.Items[i].Status.Conditions, extv1beta1.ConditionReady) {
				claimsNotReady++
			}
		}
		var pools extv1beta1.SandboxWarmPoolList
		if err := c.List(ctx, &pools, client.InNamespace(ns)); err != nil {
			return err
		}
		poolsShort := 0
		for _, p := range pools.Items {
			if p.Spec.Replicas != nil && (p.Status.ReadyReplicas != *p.Spec.Replicas || p.Status.Replicas != *p.Spec.Replicas) {
				poolsShort++
			}
		}
		if notReady+claimsNotReady+poolsShort > 0 {
			return fmt.Errorf("%d of %d Sandboxes not Ready (e.g. %s), %d of %d claims not Ready, %d pools not full",
				notReady, len(sbs.Items), example, claimsNotReady, len(claims.Items), poolsShort)
		}
		return nil
	}
}

// waitFor polls check until it returns nil and returns how long that took.
func waitFor(t *testing.T, timeout time.Duration, what string, check func() error) time.Duration {
	t.Helper()
	return tests.WaitForEvery(t, 250*time.Millisecond, timeout, what, check)
}

// invariants are what must hold after every scenario; each count but the
// totals must be zero.
type invariants struct {
	Sandboxes, Running, Claims, Pods, PVCs int

	RunningWithoutOnePod    int `json:"runningWithoutOnePod"`
	SuspendedWithPod        int `json:"suspendedWithPod"`
	MissingService          int `json:"missingService"`
	MissingPVC              int `json:"missingPVC"`
	ClaimsNotBoundToOne     int `json:"claimsNotBoundToOne"`
	SandboxesWithTwoClaims  int `json:"sandboxesWithTwoClaims"`
	OrphanPods              int `json:"orphanPods"`
	PVCsLostWhileSandboxed  int `json:"pvcsLostWhileSandboxed"`
	PodsCreatedTwice        int `json:"podsCreatedTwice"`
	ClaimsWithSecondSandbox int `json:"claimsWithSecondSandbox"`
	// BoundClaimsLostSandbox counts claims that still exist and still name
	// a Sandbox that was deleted: data lost under a live claim.
	BoundClaimsLostSandbox int `json:"boundClaimsLostSandbox"`
	// ClaimsBoundToForeignSandbox counts claims bound to a Sandbox their
	// pool did not make (nor the controller for them, cold): one first seen
	// controlled by something else (recorder.foreignBound).
	ClaimsBoundToForeignSandbox int `json:"claimsBoundToForeignSandbox"`
}

func (i invariants) violations() int {
	return i.RunningWithoutOnePod + i.SuspendedWithPod + i.MissingService + i.MissingPVC + i.ClaimsNotBoundToOne +
		i.SandboxesWithTwoClaims + i.OrphanPods + i.PVCsLostWhileSandboxed + i.PodsCreatedTwice + i.ClaimsWithSecondSandbox +
		i.BoundClaimsLostSandbox + i.ClaimsBoundToForeignSandbox
}

// check counts the invariants in ns now, plus what rec saw happen (nil: not
// recorded).
func check(t *testing.T, c client.Client, ns string, rec *recorder) invariants {
	t.Helper()
	ctx := context.Background()
	var inv invariants
	var sbs sandboxv1beta1.SandboxList
	var pods corev1.PodList
	var svcs corev1.ServiceList
	var pvcs corev1.PersistentVolumeClaimList
	var claims extv1beta1.SandboxClaimList
	for _, l := range []client.ObjectList{&sbs, &pods, &svcs, &pvcs, &claims} {
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	inv.Sandboxes, inv.Claims, inv.Pods, inv.PVCs = len(sbs.Items), len(claims.Items), len(pods.Items), len(pvcs.Items)
	byUID := map[types.UID]*sandboxv1beta1.Sandbox{}
	for i := range sbs.Items {
		byUID[sbs.Items[i].UID] = &sbs.Items[i]
	}
	podsOf := map[types.UID]int{}
	for _, p := range pods.Items {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || !sandboxv1beta1.RefersTo(*ref, sandboxv1beta1.SandboxKind) || byUID[ref.UID] == nil {
			if p.DeletionTimestamp == nil {
				inv.OrphanPods++
				t.Logf("orphan Pod %s (controller %v)", p.Name, ref)
			}
			continue
		}
		if p.DeletionTimestamp == nil {
			podsOf[ref.UID]++
		}
	}
	services := map[string]bool{}
	for _, s := range svcs.Items {
		services[s.Name] = true
	}
	claimsOf := map[string]bool{}
	for _, p := range pvcs.Items {
		claimsOf[p.Name] = true
	}
	for i := range sbs.Items {
		sb := &sbs.Items[i]
		if sb.DeletionTimestamp != nil {
			continue
		}
		if sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended {
			if podsOf[sb.UID] != 0 {
				inv.SuspendedWithPod++
			}
		} else {
			inv.Running++
			if podsOf[sb.UID] != 1 {
				inv.RunningWithoutOnePod++
				t.Logf("Sandbox %s runs %d Pods", sb.Name, podsOf[sb.UID])
			}
		}
		if ptr.Deref(sb.Spec.Service, false) && !services[sb.Name] {
			inv.MissingService++
			t.Logf("Sandbox %s has no Service", sb.Name)
		}
		for _, vct := range sb.Spec.VolumeClaimTemplates {
			if !claimsOf[vct.Name+"-"+sb.Name] {
				inv.MissingPVC++
				t.Logf("Sandbox %s has no PVC %s-%s", sb.Name, vct.Name, sb.Name)
			}
		}
	}
	boundTo := map[string]int{}
	for _, cl := range claims.Items {
		name := cl.Status.Sandbox.Name
		sb := findSandbox(sbs.Items, name)
		if name == "" || sb == nil || !extv1beta1.IsClaimedBy(sb, &cl) {
			inv.ClaimsNotBoundToOne++
			t.Logf("claim %s is bound to %q (exists %v)", cl.Name, name, sb != nil)
			continue
		}
		boundTo[name]++
	}
	for name, n := range boundTo {
		if n > 1 {
			inv.SandboxesWithTwoClaims++
			t.Logf("Sandbox %s is bound to %d claims", name, n)
		}
	}
	if rec != nil {
		rec.count(&inv, sbs.Items)
		for _, d := range rec.details {
			t.Log(d)
		}
		inv.BoundClaimsLostSandbox = rec.lostUnder(t, claims.Items)
		var pools extv1beta1.SandboxWarmPoolList
		if err := c.List(ctx, &pools, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		inv.ClaimsBoundToForeignSandbox = rec.foreignBound(t, claims.Items, sbs.Items, pools.Items)
	}
	return inv
}

func findSandbox(items []sandboxv1beta1.Sandbox, name string) *sandboxv1beta1.Sandbox {
	for i := range items {
		if items[i].Name == name {
			return &items[i]
		}
	}
	return nil
}

// recorder watches a namespace for the duration of a scenario: every Pod
// created for a Sandbox, every Sandbox a claim ever controlled, every PVC
// deleted.
type recorder struct {
	mu              sync.Mutex
	podsBySandbox   map[types.UID]map[types.UID]bool // Sandbox UID -> Pod UIDs ever seen
	sandboxByClaim  map[types.UID]map[types.UID]bool // claim UID -> Sandbox UIDs ever controlled
	deletedPVCOwner map[string]types.UID             // deleted PVC name -> owning Sandbox UID
	// claimedDeleted are Sandboxes deleted (or marked for deletion) while
	// a claim controlled them: claim UID -> Sandbox names.
	claimedDeleted map[types.UID]map[string]bool
	// firstController is each Sandbox's controller reference as first
	// seen (nil: none): who made it.
	firstController map[types.UID]*metav1.OwnerReference
	// names are the Sandboxes' names by UID, for the details.
	names map[types.UID]string
	// details say which objects broke an invariant, for the log.
	details []string
	stop    []func()
}

func record(t *testing.T, ns string) *recorder {
	t.Helper()
	r := &recorder{podsBySandbox: map[types.UID]map[types.UID]bool{}, sandboxByClaim: map[types.UID]map[types.UID]bool{},
		deletedPVCOwner: map[string]types.UID{}, claimedDeleted: map[types.UID]map[string]bool{},
		firstController: map[types.UID]*metav1.OwnerReference{}, names: map[types.UID]string{}}
	wc, err := client.NewWithWatch(local.Config, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []client.ObjectList{&corev1.PodList{}, &sandboxv1beta1.SandboxList{}, &corev1.PersistentVolumeClaimList{}} {
		r.watch(t, wc, ns, l)
	}
	t.Cleanup(r.close)
	return r
}

// watch follows one kind; a watch the API server ends (it restarts in one
// scenario) is started again from the last resourceVersion seen.
func (r *recorder) watch(t *testing.T, wc client.WithWatch, ns string, list client.ObjectList) {
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = append(r.stop, cancel)
	go func() {
		rv := ""
		for ctx.Err() == nil {
			w, err := wc.Watch(ctx, list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					rv = "" // expired: start over (a list event replay only adds what is known)
					break
				}
				o, ok := ev.Object.(client.Object)
				if !ok {
					continue
				}
				rv = o.GetResourceVersion()
				if ev.Type != watch.Bookmark {
					r.observe(ev.Type, o)
				}
			}
			w.Stop()
		}
	}()
}

func (r *recorder) observe(typ watch.EventType, o client.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref := metav1.GetControllerOf(o)
	switch o := o.(type) {
	case *corev1.Pod:
		if ref != nil && sandboxv1beta1.RefersTo(*ref, sandboxv1beta1.SandboxKind) {
			add(r.podsBySandbox, ref.UID, o.UID)
		}
	case *sandboxv1beta1.Sandbox:
		r.names[o.UID] = o.Name
		if _, seen := r.firstController[o.UID]; !seen {
			r.firstController[o.UID] = ref
		}
		if ref != nil && sandboxv1beta1.RefersTo(*ref, extv1beta1.ClaimKind) {
			add(r.sandboxByClaim, ref.UID, o.UID)
			if typ == watch.Deleted || o.DeletionTimestamp != nil {
				if r.claimedDeleted[ref.UID] == nil {
					r.claimedDeleted[ref.UID] = map[string]bool{}
				}
				r.claimedDeleted[ref.UID][o.Name] = true
			}
		}
	case *corev1.PersistentVolumeClaim:
		if typ == watch.Deleted && ref != nil {
			r.deletedPVCOwner[o.Name] = ref.UID
		}
	}
}

func add(m map[types.UID]map[types.UID]bool, k, v types.UID) {
	if m[k] == nil {
		m[k] = map[types.UID]bool{}
	}
	m[k][v] = true
}

// count adds what the recorder saw to inv, against the Sandboxes that
// exist now.
func (r *recorder) count(inv *invariants, sbs []sandboxv1beta1.Sandbox) {
	r.mu.Lock()
	defer r.mu.Unlock()
	exists := map[types.UID]*sandboxv1beta1.Sandbox{}
	for i := range sbs {
		exists[sbs[i].UID] = &sbs[i]
	}
	for sb, pods := range r.podsBySandbox {
		// A suspend/resume wave legitimately makes a second Pod; a Sandbox
		// whose spec never changed (generation 1) must have had one.
		if s := exists[sb]; s != nil && len(pods) > 1 && s.Generation == 1 {
			inv.PodsCreatedTwice++
			r.details = append(r.details, fmt.Sprintf("Sandbox %s (controller %v) had Pods %v", s.Name, metav1.GetControllerOf(s), slices.Collect(maps.Keys(pods))))
		}
	}
	for claim, sbs := range r.sandboxByClaim {
		if len(sbs) > 1 {
			inv.ClaimsWithSecondSandbox++
			var which []string
			for uid := range sbs {
				which = append(which, fmt.Sprintf("%s (first controller %v, exists %t)", r.names[uid], r.firstController[uid], exists[uid] != nil))
			}
			r.details = append(r.details, fmt.Sprintf("claim %s controlled Sandboxes %v", claim, which))
		}
	}
	for _, owner := range r.deletedPVCOwner {
		if exists[owner] != nil {
			inv.PVCsLostWhileSandboxed++
		}
	}
}

// lostUnder counts the claims (of those that exist now) whose bound
// Sandbox, as their status names it, was deleted while they controlled it.
func (r *recorder) lostUnder(t *testing.T, claims []extv1beta1.SandboxClaim) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	lost := 0
	for _, cl := range claims {
		if name := cl.Status.Sandbox.Name; name != "" && r.claimedDeleted[cl.UID][name] {
			lost++
			t.Logf("claim %s lost its Sandbox %s", cl.Name, name)
		}
	}
	return lost
}

// podsSeen counts the Sandbox Pods seen so far.
func (r *recorder) podsSeen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, pods := range r.podsBySandbox {
		n += len(pods)
	}
	return n
}

func (r *recorder) close() {
	for _, s := range r.stop {
		s()
	}
}

var errorLine = regexp.MustCompile(`"level":"(error|dpanic|panic|fatal)"|^E\d{4} |panic:|goroutine \d+ \[`)

// errorLines counts the error-level lines (zap JSON or console, klog, Go
// panics) in a controller log, and returns a few for the report.
func errorLines(t *testing.T, path string) (int, []string) {
	t.Helper()
	s := scanErrors(t, path)
	return s.Lines + s.Transient, append(s.Examples, s.TransientExamples...)
}

// errorScan is what a controller log says went wrong. Transient lines are
// errors the API server returned for a moment's overload (timeouts, etcd
// hiccups, 429s, dropped connections): retried and reported, but not a
// fault of the controller's.
type errorScan struct {
	Lines, Transient            int
	Examples, TransientExamples []string
}

// transientError matches the texts of the API server's transient errors.
var transientError = regexp.MustCompile(`etcdserver: |Timeout: request did not complete|the server was unable to return a response in the time allotted|the server has received too many requests|the server is currently unable to handle the request|context deadline exceeded|http2: client connection lost|connection refused|connection reset by peer|TLS handshake timeout|i/o timeout|unexpected EOF`)

func scanErrors(t *testing.T, path string) errorScan {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var s errorScan
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !errorLine.MatchString(line) && !strings.Contains(line, "\tERROR\t") {
			continue
		}
		ex := errorExample(line)
		if transientError.MatchString(ex) {
			s.Transient++
			if len(s.TransientExamples) < 3 {
				s.TransientExamples = append(s.TransientExamples, ex)
			}
			continue
		}
		s.Lines++
		if len(s.Examples) < 3 {
			s.Examples = append(s.Examples, ex)
		}
	}
	return s
}

// errorExample is a log line shortened for a report: for a zap JSON line,
// its message, object and error (the part that says what went wrong);
// otherwise the line's start.
func errorExample(line string) string {
	var entry struct {
		Msg        string `json:"msg"`
		Controller string `json:"controller"`
		Namespace  string `json:"namespace"`
		Name       string `json:"name"`
		Error      string `json:"error"`
	}
	if json.Unmarshal([]byte(line), &entry) != nil || entry.Error == "" {
		return truncate(line, 300)
	}
	return truncate(fmt.Sprintf("%s: %s %s/%s: %s", entry.Msg, entry.Controller, entry.Namespace, entry.Name, entry.Error), 600)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// report logs one scenario's figures as a JSON line, REPORT-prefixed, and
// appends it to $FAULTS_OUT when set.
func report(t *testing.T, figures map[string]any) {
	t.Helper()
	figures["scenario"] = t.Name()
	b, _ := json.Marshal(figures)
	t.Logf("REPORT %s", b)
	if out := os.Getenv("FAULTS_OUT"); out != "" {
		f, err := os.OpenFile(out, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err == nil {
			_, _ = f.Write(append(b, '\n'))
			_ = f.Close()
		}
	}
}

// scrape returns the metrics of a controller as series -> value.
func scrape(addr string) (map[string]float64, error) {
	return tests.ScrapeMetrics("http://" + addr + "/metrics")
}

// writes sums the controller's write requests to the API server (every
// rest_client_requests_total series whose method is not a read).
func writes(m map[string]float64) float64 {
	total := 0.0
	for series, v := range m {
		if !strings.HasPrefix(series, "rest_client_requests_total{") {
			continue
		}
		for _, verb := range []string{`method="POST"`, `method="PUT"`, `method="PATCH"`, `method="DELETE"`} {
			if strings.Contains(series, verb) {
				total += v
			}
		}
	}
	return total
}

var errNotReady = errors.New("not ready")

// podsMatchModes reports nil when every running Sandbox in ns has exactly
// one live Pod and every suspended one has none (terminating included).
func podsMatchModes(c client.Client, ns string) error {
	ctx := context.Background()
	var sbs sandboxv1beta1.SandboxList
	var pods corev1.PodList
	if err := c.List(ctx, &sbs, client.InNamespace(ns)); err != nil {
		return err
	}
	if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return err
	}
	live, all := map[types.UID]int{}, map[types.UID]int{}
	for i := range pods.Items {
		if ref := metav1.GetControllerOf(&pods.Items[i]); ref != nil {
			all[ref.UID]++
			if pods.Items[i].DeletionTimestamp == nil {
				live[ref.UID]++
			}
		}
	}
	bad := 0
	for _, sb := range sbs.Items {
		if sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended {
			if all[sb.UID] != 0 {
				bad++
			}
		} else if live[sb.UID] != 1 {
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d Sandboxes do not have the Pods their mode asks for", bad)
	}
	return nil
}
