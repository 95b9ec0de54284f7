package standin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Upstream's names for the router, which its SDKs look up: the Go SDK lists
// the EndpointSlices of RouterServiceName in the sandbox's namespace and
// port-forwards to the first ready endpoint's Pod on RouterServicePort; the
// Python SDK runs `kubectl port-forward svc/sandbox-router-svc` in
// agent-sandbox-system.
const (
	RouterServiceName = "sandbox-router-svc"
	RouterServicePort = 8080
	// RouterPodName is the Pod that stands for the host router in each
	// namespace; it carries RouterLabel.
	RouterPodName = "sandbox-router"
)

// RouterLabel is the label of router Pods (upstream's, and the one the
// SandboxTemplate NetworkPolicy admits); the Service selects it.
var RouterLabel = map[string]string{"app": "sandbox-router"}

// annotationRouterTarget records, on the router Pod, where kwok sends its
// port 8080.
const annotationRouterTarget = "agents.x-k8s.io/local-router"

// routerSkipped are the namespaces that get no router Service: the
// cluster's own.
var routerSkipped = map[string]bool{"kube-system": true, "kube-public": true, "kube-node-lease": true}

// runRouterService gives every namespace (but the cluster's own) the router
// as upstream's SDKs look for it, until ctx ends: a Pod RouterPodName
// (labelled app: sandbox-router; kwok runs it Running and Ready) whose port
// 8080 kwok forwards to the host router on 127.0.0.1:RouterPort, and the
// Service RouterServiceName selecting it, whose EndpointSlice the endpoint
// slice controller fills with that ready Pod. synced is closed once the
// Namespace cache has synced.
func (s *StandIn) runRouterService(ctx context.Context, synced chan<- struct{}) error {
	factory := informers.NewSharedInformerFactory(s.cs, 0)
	informer := factory.Core().V1().Namespaces().Informer()
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 10*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "standin-router"})
	enqueue := func(obj any) {
		if ns, ok := obj.(*corev1.Namespace); ok && !routerSkipped[ns.Name] {
			queue.Add(ns.Name)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return fmt.Errorf("stand-in kubelet: Namespace cache not synced: %w", ctx.Err())
	}
	close(synced)
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	t := time.NewTicker(s.o.Resync)
	defer t.Stop()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				for _, obj := range informer.GetStore().List() {
					enqueue(obj)
				}
			}
		}
	}()
	for {
		name, quit := queue.Get()
		if quit {
			return nil
		}
		obj, exists, _ := informer.GetStore().GetByKey(name)
		ns, _ := obj.(*corev1.Namespace)
		var err error
		if exists && ns != nil && ns.DeletionTimestamp == nil && ns.Status.Phase != corev1.NamespaceTerminating {
			err = s.ensureRouterService(ctx, name)
		}
		if err != nil && ctx.Err() == nil {
			s.o.Logger.Error("router service", "namespace", name, "err", err)
			queue.AddRateLimited(name)
		} else {
			queue.Forget(name)
		}
		queue.Done(name)
	}
}

// ensureRouterService applies a namespace's router Pod, its kwok
// PortForward (owned by the Pod) and the Service.
func (s *StandIn) ensureRouterService(ctx context.Context, namespace string) error {
	target := strconv.Itoa(s.o.RouterPort)
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	pod, err := s.cs.CoreV1().Pods(namespace).Apply(ctx, routerPod(namespace, target), opts)
	if err != nil {
		return fmt.Errorf("applying pod %s/%s: %w", namespace, RouterPodName, err)
	}
	if pod.DeletionTimestamp != nil {
		return errors.New("the router pod is terminating") // applied again once it is gone
	}
	pf := routerPortForward(pod, s.o.RouterPort)
	if _, err := s.dyn.Resource(portForwards).Namespace(namespace).Apply(ctx, pf.GetName(), pf, opts); err != nil {
		return fmt.Errorf("applying the port-forward of pod %s/%s: %w", namespace, RouterPodName, err)
	}
	if _, err := s.cs.CoreV1().Services(namespace).Apply(ctx, routerService(namespace), opts); err != nil {
		return fmt.Errorf("applying service %s/%s: %w", namespace, RouterServiceName, err)
	}
	return nil
}

func routerLabels() map[string]string {
	l := map[string]string{"app.kubernetes.io/managed-by": FieldManager}
	for k, v := range RouterLabel {
		l[k] = v
	}
	return l
}

// routerPod is the Pod that stands for the host router: kwok runs nothing
// of it, and its port 8080 leads to the host router through its
// PortForward.
func routerPod(namespace, target string) *corev1ac.PodApplyConfiguration {
	return corev1ac.Pod(RouterPodName, namespace).
		WithLabels(routerLabels()).
		WithAnnotations(map[string]string{annotationRouterTarget: Loopback + ":" + target}).
		WithSpec(corev1ac.PodSpec().
			WithAutomountServiceAccountToken(false).
			WithContainers(corev1ac.Container().
				WithName("router").
				WithImage("sandbox-controller:latest").
				WithCommand("/sandbox-router").
				WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(RouterServicePort).WithProtocol(corev1.ProtocolTCP))))
}

// routerService is upstream's sandbox-router-svc, selecting the router Pod.
func routerService(namespace string) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(RouterServiceName, namespace).
		WithLabels(routerLabels()).
		WithSpec(corev1ac.ServiceSpec().
			WithSelector(RouterLabel).
			WithPorts(corev1ac.ServicePort().WithName("http").WithPort(RouterServicePort).
				WithTargetPort(intstr.FromString("http")).WithProtocol(corev1.ProtocolTCP)))
}

// routerPortForward is the router Pod's kwok PortForward: its port 8080 to
// the host router.
func routerPortForward(pod *corev1.Pod, port int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"forwards": []any{
		map[string]any{
			"ports":  []any{int64(RouterServicePort)},
			"target": map[string]any{"address": Loopback, "port": int64(port)},
		},
	}}}}
	u.SetAPIVersion(kwokGV.String())
	u.SetKind("PortForward")
	u.SetName(pod.Name)
	u.SetNamespace(pod.Namespace)
	u.SetLabels(map[string]string{"app.kubernetes.io/managed-by": FieldManager})
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}})
	return u
}
