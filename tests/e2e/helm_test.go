package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/tests/envtest"
	"github.com/agentsandbox/reconciler/tests/helm"
)

// TestHelmInstallOnLocalCluster installs the chart with the Helm Go SDK
// (as `helm install agent-sandbox charts/agent-sandbox -n sandbox-operators
// --create-namespace`) on a local cluster of its own, with no CRDs
// beforehand, and runs a Sandbox to Ready with the controller acting as
// the chart's ServiceAccount.
//
// The local cluster's nodes are kwok's: they run no container, so the
// controller's image cannot run there. The chart is therefore installed
// with controller.replicas=0 (its CRDs, RBAC, Services, NetworkPolicy,
// the router's objects and the Deployment itself, scaled to zero) and the
// controller binary built from this tree runs on the host, with a token of
// the chart's ServiceAccount, so it has exactly the chart's rights. The
// webhooks are off in this install (webhook.enabled=false): the API server
// would call them through the chart's Service, which has no Pods here, and
// fail closed; the webhook objects are checked by TestHelmChartDryRun
// (envtest) and by the chart-versus-kustomize comparison.
func TestHelmInstallOnLocalCluster(t *testing.T) {
	if cluster.UseKind() {
		t.Skip("installs on a kwok cluster of its own")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	workdir, err := os.MkdirTemp("", "agent-sandbox-helm-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(workdir) }()
	cl, err := cluster.Start(ctx, cluster.Options{Name: "helm", Workdir: workdir, Nodes: 1, RuntimeClasses: []string{"gvisor"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cl.Stop(context.Background()); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	}()
	const ns = "sandbox-operators"
	rel, err := helm.Install(ctx, cl.Kubeconfig, ns, map[string]any{
		"controller": map[string]any{"replicas": 0, "extensions": true},
		"webhook":    map[string]any{"enabled": false},
		"router":     map[string]any{"enabled": true, "replicas": 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("release %s (chart %s) installed in %s", rel.Name, rel.Chart.Metadata.Version, rel.Namespace)

	admin, err := client.New(cl.Config, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the chart's CRDs Established", func() error {
		for _, name := range []string{"sandboxes.agents.x-k8s.io", "sandboxclaims.extensions.agents.x-k8s.io",
			"sandboxtemplates.extensions.agents.x-k8s.io", "sandboxwarmpools.extensions.agents.x-k8s.io"} {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := admin.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
				return err
			}
			established := false
			for _, c := range crd.Status.Conditions {
				established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
			}
			if !established {
				return fmt.Errorf("%s not Established", name)
			}
		}
		return nil
	})
	for _, name := range []string{"agent-sandbox-controller", "sandbox-router"} {
		dep := &appsv1.Deployment{}
		if err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, dep); err != nil {
			t.Fatalf("the chart's Deployment %s: %v", name, err)
		}
	}

	kubeconfig, err := serviceAccountKubeconfig(ctx, cl, ns, "agent-sandbox-controller", workdir)
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := tests.StartController(controller, kubeconfig, filepath.Join(workdir, "controller.log"),
		"--leader-elect=false", "--extensions", "--enable-webhook=false", "--controller-namespace="+ns)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := ctrl.Stop(); err != nil {
			t.Errorf("controller: %v", err)
		}
	}()

	sb := tests.Sandbox("default", "helm-installed")
	if err := admin.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, 2*time.Minute, "Sandbox Ready under the chart's controller identity",
		readyIs(admin, client.ObjectKeyFromObject(sb), metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady))
	t.Logf("Sandbox Ready %s after its creation", took.Round(time.Millisecond))

	// Uninstalling keeps the CRDs (crds.keep) and so the Sandbox.
	if err := helm.Uninstall(cl.Kubeconfig, ns); err != nil {
		t.Fatal(err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(sb), &sandboxv1beta1.Sandbox{}); err != nil {
		t.Fatalf("the Sandbox after helm uninstall: %v", err)
	}
}

// serviceAccountKubeconfig writes a kubeconfig for cl that authenticates
// with a token of the ServiceAccount ns/name.
func serviceAccountKubeconfig(ctx context.Context, cl *cluster.Cluster, ns, name, dir string) (string, error) {
	cs, err := kubernetes.NewForConfig(cl.Config)
	if err != nil {
		return "", err
	}
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", ns, name, err)
	}
	admin, err := clientcmd.LoadFromFile(cl.Kubeconfig)
	if err != nil {
		return "", err
	}
	cur := admin.Contexts[admin.CurrentContext]
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = admin.Clusters[cur.Cluster]
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name}
	cfg.CurrentContext = name
	path := filepath.Join(dir, name+".kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}
