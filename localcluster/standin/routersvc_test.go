package standin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The router's stand-in objects carry upstream's names: the Service
// sandbox-router-svc on 8080 selecting app: sandbox-router, a Pod with that
// label serving 8080, and a PortForward owned by the Pod sending 8080 to the
// host router.
func TestRouterObjects(t *testing.T) {
	pod := routerPod("team-a", "18080")
	if *pod.Name != "sandbox-router" || *pod.Namespace != "team-a" || pod.Labels["app"] != "sandbox-router" {
		t.Errorf("router pod %s/%s labels %v", *pod.Namespace, *pod.Name, pod.Labels)
	}
	if got := pod.Annotations[annotationRouterTarget]; got != "127.0.0.1:18080" {
		t.Errorf("router pod target annotation %q", got)
	}
	c := pod.Spec.Containers[0]
	if len(c.Ports) != 1 || *c.Ports[0].ContainerPort != 8080 || *c.Ports[0].Name != "http" {
		t.Errorf("router pod ports %+v, want http 8080", c.Ports)
	}
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Error("the router pod mounts a ServiceAccount token; it runs nothing")
	}

	svc := routerService("team-a")
	if *svc.Name != "sandbox-router-svc" || *svc.Namespace != "team-a" {
		t.Errorf("service %s/%s", *svc.Namespace, *svc.Name)
	}
	if diff := cmp.Diff(map[string]string{"app": "sandbox-router"}, svc.Spec.Selector); diff != "" {
		t.Errorf("service selector (-want +got):\n%s", diff)
	}
	p := svc.Spec.Ports[0]
	if *p.Port != 8080 || p.TargetPort.StrVal != "http" || *p.Protocol != corev1.ProtocolTCP {
		t.Errorf("service port %+v", p)
	}

	live := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "sandbox-router", UID: "router-uid"}}
	pf := routerPortForward(live, 18080)
	if pf.GetKind() != "PortForward" || pf.GetNamespace() != "team-a" || pf.GetName() != "sandbox-router" {
		t.Errorf("port-forward %s %s/%s", pf.GetKind(), pf.GetNamespace(), pf.GetName())
	}
	if refs := pf.GetOwnerReferences(); len(refs) != 1 || refs[0].Kind != "Pod" || refs[0].UID != "router-uid" {
		t.Errorf("port-forward owners %+v, want the router pod", refs)
	}
	want := map[string]any{"forwards": []any{map[string]any{
		"ports": []any{int64(8080)}, "target": map[string]any{"address": "127.0.0.1", "port": int64(18080)},
	}}}
	if diff := cmp.Diff(want, pf.Object["spec"]); diff != "" {
		t.Errorf("port-forward spec (-want +got):\n%s", diff)
	}
	if routerSkipped["default"] || routerSkipped["agent-sandbox-system"] || !routerSkipped["kube-system"] {
		t.Error("router namespaces: want every namespace but the cluster's own")
	}
}
