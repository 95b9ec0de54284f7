package client

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// follow watches the Pod a port-forward reaches (one watch, by name) and
// drops the connection when that Pod goes or another Pod takes its name
// (a Sandbox suspended and resumed, a Pod recreated). Streams to a Pod
// that is gone may hang rather than fail; dropped, they fail at once, idle
// HTTP connections are closed, and the next request dials the Pod that
// now has the name. It runs until ctx ends (Close).
func (p *portForward) follow(ctx context.Context) {
	var uid types.UID
	rv := ""
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		if rv == "" {
			pod := &corev1.Pod{}
			err := p.core.Get().Namespace(p.namespace).Resource("pods").Name(p.name).Do(ctx).Into(pod)
			switch {
			case err == nil:
				if uid != "" && pod.UID != uid {
					p.reset()
				}
				uid, rv = pod.UID, pod.ResourceVersion
			case apierrors.IsNotFound(err):
				if uid != "" {
					p.reset()
				}
				uid = ""
				list := &corev1.PodList{}
				if err := p.core.Get().Namespace(p.namespace).Resource("pods").VersionedParams(&metav1.ListOptions{
					FieldSelector: fields.OneTermEqualSelector("metadata.name", p.name).String(), Limit: 1,
				}, metav1.ParameterCodec).Do(ctx).Into(list); err == nil {
					rv = list.ResourceVersion
				}
			}
		}
		if rv != "" {
			uid, rv = p.watchPod(ctx, uid, rv)
			backoff = 200 * time.Millisecond
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// watchPod follows the Pod from resourceVersion rv until the watch ends,
// returning the UID it last saw and the version to go on from ("" to read
// the Pod afresh).
func (p *portForward) watchPod(ctx context.Context, uid types.UID, rv string) (types.UID, string) {
	w, err := p.core.Get().Namespace(p.namespace).Resource("pods").VersionedParams(&metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", p.name).String(),
		ResourceVersion: rv,
		Watch:           true,
	}, metav1.ParameterCodec).Watch(ctx)
	if err != nil {
		return uid, ""
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return uid, rv
		case ev, ok := <-w.ResultChan():
			if !ok {
				return uid, rv
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				return uid, "" // an error event (e.g. 410): read afresh
			}
			rv = pod.ResourceVersion
			switch {
			case ev.Type == watch.Deleted:
				if uid == "" || pod.UID == uid {
					p.reset()
				}
				uid = ""
			case uid != "" && pod.UID != uid:
				p.reset()
				uid = pod.UID
			case pod.DeletionTimestamp != nil:
				// Going: requests to it cannot succeed for long.
				p.reset()
				uid = pod.UID
			default:
				uid = pod.UID
			}
		}
	}
}

// reset drops the SPDY connection and the HTTP connections over it.
func (p *portForward) reset() {
	p.mu.Lock()
	conn := p.conn
	p.conn = nil
	p.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
	p.tr.CloseIdleConnections()
}
