package router

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
)

// kwokPortForwards are kwok's PortForward objects: one per Pod, named as
// the Pod, saying where each of its ports really is.
var kwokPortForwards = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "portforwards"}

// KwokForwards reaches the Pods of a cluster run by kwok, whose Pod IPs
// are made up (--transport=kwok): a Pod's port is the address its kwok
// PortForward object gives it (where a local cluster's stand-in kubelet
// runs the Pod's server), dialled straight, as a pod network would carry
// the connection; kwok itself tunnels pods/portforward there. Only a Pod
// the router routed to by its rules is dialled, only at an address
// AllowedAddress lets through, and forwards that run a command are never
// used.
type KwokForwards struct {
	allowLocal bool
	dialer     net.Dialer

	mu       sync.RWMutex
	forwards map[string][]kwokForward // by namespace/name
	pods     map[types.UID]podRef
}

// kwokForward is one forward of a PortForward object: its ports (none:
// every port) and target; address "" for a forward to a command.
type kwokForward struct {
	ports   []int64
	address string
	port    int64
}

// NewKwokForwards watches kwok's PortForward objects (in namespaces, or
// all) and returns once they are listed.
func NewKwokForwards(ctx context.Context, cfg *rest.Config, namespaces []string, allowLocal bool) (*KwokForwards, error) {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	k := newKwokForwards(allowLocal)
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	var synced []toolscache.InformerSynced
	for _, ns := range namespaces {
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, ns, nil)
		inf := f.ForResource(kwokPortForwards).Informer()
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    k.set,
			UpdateFunc: func(_, obj any) { k.set(obj) },
			DeleteFunc: k.remove,
		}); err != nil {
			return nil, err
		}
		f.Start(ctx.Done())
		synced = append(synced, inf.HasSynced)
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !toolscache.WaitForCacheSync(sctx.Done(), synced...) {
		return nil, fmt.Errorf("listing kwok's PortForward objects (%s): not synced within a minute; is this a kwok cluster?", kwokPortForwards.GroupResource())
	}
	return k, nil
}

func newKwokForwards(allowLocal bool) *KwokForwards {
	return &KwokForwards{allowLocal: allowLocal, dialer: net.Dialer{Timeout: 10 * time.Second},
		forwards: map[string][]kwokForward{}, pods: map[types.UID]podRef{}}
}

func (k *KwokForwards) set(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	items, _, _ := unstructured.NestedSlice(u.Object, "spec", "forwards")
	var fws []kwokForward
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			continue
		}
		var fw kwokForward
		if ports, ok := m["ports"].([]any); ok {
			for _, p := range ports {
				if n, ok := p.(int64); ok {
					fw.ports = append(fw.ports, n)
				}
			}
		}
		if _, command := m["command"]; !command {
			fw.address, _, _ = unstructured.NestedString(m, "target", "address")
			fw.port, _, _ = unstructured.NestedInt64(m, "target", "port")
		}
		fws = append(fws, fw)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.forwards[u.GetNamespace()+"/"+u.GetName()] = fws
}

func (k *KwokForwards) remove(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.forwards, u.GetNamespace()+"/"+u.GetName())
}

// Remember records which Pod a UID names, for DialPod.
func (k *KwokForwards) Remember(uid types.UID, namespace, name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pods[uid] = podRef{namespace, name}
}

// Forget drops a Pod that is gone.
func (k *KwokForwards) Forget(uid types.UID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.pods, uid)
}

// target is where port of the Pod with uid is, as kwok picks it: the
// forward that lists the port, else the first that lists none.
func (k *KwokForwards) target(uid types.UID, port int) (string, error) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	ref, ok := k.pods[uid]
	if !ok {
		return "", fmt.Errorf("no pod with uid %s", uid)
	}
	var found *kwokForward
	for _, fw := range k.forwards[ref.namespace+"/"+ref.name] {
		if slices.Contains(fw.ports, int64(port)) {
			found = &fw
			break
		}
		if len(fw.ports) == 0 && found == nil {
			found = &fw
		}
	}
	if found == nil || found.address == "" {
		// kwok's words, so that it is known for a port nothing serves yet.
		return "", fmt.Errorf("no forward found for port %d in pod %q", port, ref.namespace+"/"+ref.name)
	}
	ip, err := netip.ParseAddr(found.address)
	if err != nil || !AllowedAddress(ip, k.allowLocal) {
		return "", fmt.Errorf("pod %s/%s: the address %q of its kwok PortForward is not an allowed IP address", ref.namespace, ref.name, found.address)
	}
	return net.JoinHostPort(ip.String(), strconv.FormatInt(found.port, 10)), nil
}

// DialPod connects to port of the Pod with uid (named by Remember).
// Failures are *net.OpError dial errors.
func (k *KwokForwards) DialPod(ctx context.Context, uid types.UID, port int) (net.Conn, error) {
	addr, err := k.target(uid, port)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "kwok", Err: err}
	}
	return k.dialer.DialContext(ctx, "tcp", addr)
}
