package client

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// claimedWatch follows, in the background, the Sandboxes labelled with one
// claim's UID (agents.x-k8s.io/claim-uid). A controller puts that label on
// the warm pool member a claim takes, or on the Sandbox it makes for the
// claim, in the same write, and names the Sandbox in the claim's status
// only after that write. So by the time Create sees its claim bound, the
// Sandbox has usually come by this watch, and no GET of it is needed.
//
// The watch starts from the API server's watch cache (resourceVersion 0),
// which sends Sandboxes labelled already as ADDED events. If it cannot be
// opened (RBAC that lets a caller watch named objects only, say) nothing
// is seen, and the Sandbox is read by GET as before.
type claimedWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	seen map[string]*sandboxv1beta1.Sandbox // by name, as last seen
}

// watchClaimed opens a claimedWatch on namespace's Sandboxes labelled with
// claimUID; it ends with ctx or stop.
func watchClaimed(ctx context.Context, rc *rest.RESTClient, namespace string, claimUID types.UID) *claimedWatch {
	ctx, cancel := context.WithCancel(ctx)
	cw := &claimedWatch{cancel: cancel, done: make(chan struct{}), seen: map[string]*sandboxv1beta1.Sandbox{}}
	go cw.run(ctx, rc, namespace, claimUID)
	return cw
}

func (cw *claimedWatch) run(ctx context.Context, rc *rest.RESTClient, namespace string, claimUID types.UID) {
	defer close(cw.done)
	selector := labels.SelectorFromSet(labels.Set{sandboxv1beta1.LabelClaimUID: string(claimUID)}).String()
	w, err := rc.Get().Namespace(namespace).Resource("sandboxes").VersionedParams(&metav1.ListOptions{
		LabelSelector:   selector,
		ResourceVersion: "0",
		Watch:           true,
	}, metav1.ParameterCodec).Watch(ctx)
	if err != nil {
		return
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			sb, isSandbox := ev.Object.(*sandboxv1beta1.Sandbox)
			if !isSandbox { // an error's Status
				continue
			}
			cw.mu.Lock()
			if ev.Type == watch.Deleted {
				delete(cw.seen, sb.Name)
			} else {
				cw.seen[sb.Name] = sb
			}
			cw.mu.Unlock()
		}
	}
}

// sandbox returns the Sandbox named name that claim controls (API group,
// kind, name and UID) and that is not being deleted, as the watch last saw
// it, or nil: a label anyone may write is a hint, not proof.
func (cw *claimedWatch) sandbox(claim *extv1beta1.SandboxClaim, name string) *sandboxv1beta1.Sandbox {
	if cw == nil {
		return nil
	}
	cw.mu.Lock()
	sb := cw.seen[name]
	cw.mu.Unlock()
	if sb == nil || sb.DeletionTimestamp != nil || !extv1beta1.IsClaimedBy(sb, claim) {
		return nil
	}
	return sb
}

// stop ends the watch (nil: nothing to end).
func (cw *claimedWatch) stop() {
	if cw != nil {
		cw.cancel()
	}
}
