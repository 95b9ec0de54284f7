package standin

import (
	"context"
	"errors"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// The ports a sandbox Pod's runtime serves on; the Pod's PortForward sends
// each to the matching listener of the local process.
const (
	// RuntimePort is upstream's legacy protocol.
	RuntimePort = 8888
	// SandboxdRESTPort is sandboxd's REST API (/v1/files, /v1/health).
	SandboxdRESTPort = 8080
	// SandboxdGRPCPort is sandboxd's gRPC process.v1.ProcessService.
	SandboxdGRPCPort = 9090
	// EnvdPort is the E2B in-sandbox daemon's subset (envd), which the
	// e2b SDK reaches through the router.
	EnvdPort = 49983
)

// FieldManager owns the kwok objects the stand-in applies.
const FieldManager = "sandbox-standin"

// kwok's per-Pod kinds (kwok.x-k8s.io/v1alpha1, served when the cluster is
// created with --enable-crds=PortForward,Exec,Logs).
var (
	kwokGV       = schema.GroupVersion{Group: "kwok.x-k8s.io", Version: "v1alpha1"}
	portForwards = kwokGV.WithResource("portforwards")
	execs        = kwokGV.WithResource("execs")
	logs         = kwokGV.WithResource("logs")
	// KwokCRDs are the kinds kwokctl's --enable-crds must list.
	KwokCRDs = []string{"PortForward", "Exec", "Logs"}
)

// kwokObjects are the PortForward, Exec and Logs objects of a Pod whose
// runtime listens on 127.0.0.1 at p (one forward per Pod port it serves) in
// the Sandbox directory sbDir. They are
// named like the Pod and owned by it, so that they go with the Pod even when
// no stand-in runs.
func kwokObjects(pod *corev1.Pod, sbDir string, p ports, env []corev1.EnvVar) map[schema.GroupVersionResource]*unstructured.Unstructured {
	forwards := []any{}
	for _, f := range []struct{ pod, local int }{{RuntimePort, p.legacy}, {SandboxdRESTPort, p.rest}, {SandboxdGRPCPort, p.grpc}, {EnvdPort, p.envd}} {
		if f.local != 0 {
			forwards = append(forwards, map[string]any{
				"ports":  []any{int64(f.pod)},
				"target": map[string]any{"address": Loopback, "port": int64(f.local)},
			})
		}
	}
	envs := []any{}
	for _, e := range env {
		envs = append(envs, map[string]any{"name": e.Name, "value": e.Value})
	}
	logFile := filepath.Join(sbDir, criLog)
	specs := map[schema.GroupVersionResource]struct {
		kind string
		spec map[string]any
	}{
		portForwards: {"PortForward", map[string]any{"forwards": forwards}},
		execs: {"Exec", map[string]any{"execs": []any{map[string]any{
			"local": map[string]any{"workDir": filepath.Join(sbDir, workDir), "envs": envs},
		}}}},
		logs: {"Logs", map[string]any{"logs": []any{map[string]any{
			"logsFile": logFile, "follow": true,
		}}}},
	}
	out := map[schema.GroupVersionResource]*unstructured.Unstructured{}
	for gvr, s := range specs {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": s.spec}}
		u.SetAPIVersion(kwokGV.String())
		u.SetKind(s.kind)
		u.SetName(pod.Name)
		u.SetNamespace(pod.Namespace)
		u.SetLabels(map[string]string{"app.kubernetes.io/managed-by": FieldManager})
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}})
		out[gvr] = u
	}
	return out
}

// applyKwokObjects server-side applies a Pod's kwok objects.
func applyKwokObjects(ctx context.Context, dyn dynamic.Interface, objs map[schema.GroupVersionResource]*unstructured.Unstructured) error {
	var errs []error
	for gvr, u := range objs {
		_, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Apply(ctx, u.GetName(), u,
			metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// deleteKwokObjects deletes a Pod's kwok objects, if they are still that
// Pod's (a Pod of the same name made since has its own).
func deleteKwokObjects(ctx context.Context, dyn dynamic.Interface, namespace, pod string, uid types.UID) error {
	var errs []error
	for _, gvr := range []schema.GroupVersionResource{portForwards, execs, logs} {
		r := dyn.Resource(gvr).Namespace(namespace)
		u, err := r.Get(ctx, pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			errs = append(errs, err)
			continue
		}
		if refs := u.GetOwnerReferences(); uid != "" && (len(refs) != 1 || refs[0].UID != uid) {
			continue
		}
		objUID := u.GetUID()
		err = r.Delete(ctx, pod, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &objUID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// literalEnv is the environment a sandbox Pod's first container sets with
// plain values (valueFrom and envFrom need the kubelet and are left out).
func literalEnv(pod *corev1.Pod) []corev1.EnvVar {
	if len(pod.Spec.Containers) == 0 {
		return nil
	}
	var env []corev1.EnvVar
	for _, e := range pod.Spec.Containers[0].Env {
		if e.ValueFrom == nil {
			env = append(env, corev1.EnvVar{Name: e.Name, Value: e.Value})
		}
	}
	return env
}
