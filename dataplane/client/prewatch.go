package client

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// earlyWatch is a watch on one name opened in the background before the
// object of that name is created: by the time the create returns it is
// open, so waiting for the object costs no round trip after it. It starts
// from any version (resourceVersion 0: the API server's watch cache as it
// is, with no read of etcd first; the create, if the cache has not seen it
// yet, comes as an event after). It may see another object of the name
// (one being deleted, or someone else's made first): waitFor only heeds
// the UID the create returned.
type earlyWatch struct {
	opened chan struct{}
	w      watch.Interface
}

// watchName opens an earlyWatch on name in namespace.
func watchName(ctx context.Context, rc *rest.RESTClient, resource, namespace, name string) *earlyWatch {
	e := &earlyWatch{opened: make(chan struct{})}
	go func() {
		defer close(e.opened)
		w, err := watchByName(ctx, rc, resource, namespace, name, "0")
		if err == nil {
			e.w = w
		}
	}()
	return e
}

// watchByName watches the object name in namespace from resourceVersion
// rv, by a metadata.name field selector (what RBAC lets a caller with
// watch on that one name do).
func watchByName(ctx context.Context, rc *rest.RESTClient, resource, namespace, name, rv string) (watch.Interface, error) {
	return rc.Get().Namespace(namespace).Resource(resource).VersionedParams(&metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: rv,
		Watch:           true,
	}, metav1.ParameterCodec).Watch(ctx)
}

// take returns the watch once it is open, nil if it could not be opened
// (waitFor opens its own then) or e is nil.
func (e *earlyWatch) take() watch.Interface {
	if e == nil {
		return nil
	}
	<-e.opened
	return e.w
}

// stop ends the watch, now or once it is open.
func (e *earlyWatch) stop() {
	go func() {
		if w := e.take(); w != nil {
			w.Stop()
		}
	}()
}
