package extensions

import (
	"context"
	"slices"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/controllers"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/manager"
)

// createLog is a blindClient that records the Sandbox creates it passes
// on and how the API server answered them.
type createLog struct {
	blindClient
	mu      sync.Mutex
	created []string // name, or "name: already exists"
	objects map[string]*sandboxv1beta1.Sandbox
}

func (c *createLog) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := c.blindClient.Create(ctx, obj, opts...)
	if _, ok := obj.(*sandboxv1beta1.Sandbox); ok {
		c.mu.Lock()
		entry := obj.GetName()
		if apierrors.IsAlreadyExists(err) {
			entry += ": already exists"
		}
		if err == nil {
			if c.objects == nil {
				c.objects = map[string]*sandboxv1beta1.Sandbox{}
			}
			c.objects[obj.GetName()] = obj.(*sandboxv1beta1.Sandbox).DeepCopy()
		}
		c.created = append(c.created, entry)
		c.mu.Unlock()
	}
	return err
}

// Apply records the engine's Sandbox creates by apply (those carrying
// ssa.CreateOnlyVersion) as Create records create requests: a Conflict is
// the name already taken.
func (c *createLog) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	u, ok := obj.(interface {
		GetKind() string
		GetName() string
		GetResourceVersion() string
		UnstructuredContent() map[string]any
	})
	creates := ok && u.GetKind() == "Sandbox" && u.GetResourceVersion() == ssa.CreateOnlyVersion
	err := c.blindClient.Apply(ctx, obj, opts...)
	if !creates || err != nil && !apierrors.IsConflict(err) {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	entry := u.GetName()
	if err != nil {
		entry += ": already exists"
	} else {
		sb := &sandboxv1beta1.Sandbox{}
		if cerr := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), sb); cerr != nil {
			return cerr
		}
		if c.objects == nil {
			c.objects = map[string]*sandboxv1beta1.Sandbox{}
		}
		c.objects[entry] = sb
	}
	c.created = append(c.created, entry)
	return err
}

// TestMemberNameCollisionTriesAnotherName: a pool reconciler whose cache
// does not show the Sandbox that holds the name it drew (another user's,
// say) is answered that the name exists and creates the member under a new name,
// as the API server retries a generateName: the Sandbox of that name is
// never touched, and its name is never a member's.
func TestMemberNameCollisionTriesAnotherName(t *testing.T) {
	ns := env.Namespace(t)
	foreign := tests.Sandbox(ns, "pool-bbbbb")
	create(t, newTemplate(ns, "tpl"), foreign)
	before, _ := get(t, ns, "pool-bbbbb", &sandboxv1beta1.Sandbox{})
	create(t, newPool(ns, "pool", "tpl", 1))
	pool, _ := get(t, ns, "pool", &extv1beta1.SandboxWarmPool{})

	log := &createLog{blindClient: blindClient{env.Client}}
	draws := []string{"bbbbb", "ccccc", "ddddd"}
	r := &controllers.WarmPoolReconciler{
		Client: log, Engine: ssa.New(log, manager.FieldManager, manager.StatusManager),
		Recorder: events.NewFakeRecorder(100), MaxBatch: 300,
		Suffix: func() string { s := draws[0]; draws = draws[1:]; return s },
	}
	r.SetDefaults()
	if _, err := r.Reconcile(ctxFor(t), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pool)}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if want := []string{"pool-bbbbb: already exists", "pool-ccccc"}; !slices.Equal(log.created, want) {
		t.Errorf("creates %v, want %v", log.created, want)
	}
	// The running manager's Sandbox reconciler writes the foreign
	// Sandbox's status (it is a plain Sandbox), and its pool reconciler
	// races this one (it may delete the excess member): what must hold is
	// that the same Sandbox, spec and owners unchanged, still holds the
	// name, and that the create under the new name made the pool's member.
	after, err := get(t, ns, "pool-bbbbb", &sandboxv1beta1.Sandbox{})
	if err != nil || after.UID != before.UID || after.Generation != before.Generation || metav1.GetControllerOf(after) != nil {
		t.Errorf("the Sandbox that held the name was touched: %+v, %v", after.ObjectMeta, err)
	}
	member := log.objects["pool-ccccc"]
	if member == nil {
		t.Fatalf("no member created under the new name: %v", log.created)
	}
	if !extv1beta1.IsPoolMember(member, pool) {
		t.Errorf("pool-ccccc is not the pool's member: %+v", member.OwnerReferences)
	}
}
