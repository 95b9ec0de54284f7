package envtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kubelet stands in for the kubelets envtest does not have, for one
// namespace: every Pod is bound to a node and reported Running and Ready
// with an IP, and a Pod being deleted is finished off. It runs until the
// test ends.
type Kubelet struct {
	// Hold, while set, leaves new Pods Pending (as on a full cluster).
	Hold atomic.Bool
	ips  atomic.Int64
}

// StartKubelet runs a Kubelet for namespace ns until t ends.
func (e *Env) StartKubelet(t testing.TB, ns string) *Kubelet {
	k := &Kubelet{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var pods corev1.PodList
			if err := e.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
				continue
			}
			for i := range pods.Items {
				k.tend(ctx, e.Client, &pods.Items[i])
			}
		}
	}()
	return k
}

func (k *Kubelet) tend(ctx context.Context, c client.Client, pod *corev1.Pod) {
	if pod.DeletionTimestamp != nil {
		_ = client.IgnoreNotFound(c.Delete(ctx, pod, client.GracePeriodSeconds(0)))
		return
	}
	if k.Hold.Load() || (pod.Status.Phase != "" && pod.Status.Phase != corev1.PodPending) {
		return
	}
	if pod.Spec.NodeName == "" {
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
		if err := c.SubResource("binding").Create(ctx, pod, b); err != nil && !apierrors.IsConflict(err) {
			return
		}
		fresh := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), fresh); err != nil {
			return
		}
		pod = fresh
	}
	n := k.ips.Add(1)
	ip := fmt.Sprintf("10.%d.%d.%d", (n>>16)&0xff, (n>>8)&0xff, n&0xff)
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = ip
	pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	_ = c.Status().Update(ctx, pod)
}
