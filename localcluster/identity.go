package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/reconciler/config/rbac"
)

// ControllerServiceAccount is the ServiceAccount the local controller acts
// as: the deploy bundle's (config/rbac), in ControllerNamespace.
const ControllerServiceAccount = "agent-sandbox-controller"

// ControllerUser is the username the API server sees on the local
// controller's requests.
const ControllerUser = "system:serviceaccount:" + ControllerNamespace + ":" + ControllerServiceAccount

// ControllerKubeconfig gives the local controller the identity it has when
// deployed: it applies the ServiceAccount and the least-privilege RBAC built
// into this binary (config/rbac) and writes a kubeconfig that acts as that
// ServiceAccount by impersonation (admin credentials that never expire,
// the ServiceAccount's rights, and its name on every request, which the
// admission webhook checks). The file is the admin kubeconfig's path with
// ".controller" added, so the controller's command line still names the
// cluster's kubeconfig (the marker `down` looks for).
func ControllerKubeconfig(ctx context.Context, c *Cluster, cl client.Client) (string, error) {
	if err := InstallControllerRBAC(ctx, cl); err != nil {
		return "", err
	}
	return impersonatingKubeconfig(c, ControllerUser, "controller")
}

// InstallControllerRBAC server-side applies the controller's ServiceAccount,
// roles and bindings from config/rbac (the controller's namespace must
// exist).
func InstallControllerRBAC(ctx context.Context, cl client.Client) error {
	return applyYAML(ctx, cl, rbac.ServiceAccount, rbac.Roles, rbac.Bindings)
}

// impersonatingKubeconfig writes c's admin kubeconfig with ".<suffix>"
// added to its path, acting as user by impersonation.
func impersonatingKubeconfig(c *Cluster, user, suffix string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", c.Kubeconfig, err)
	}
	kctx := cfg.Contexts[cfg.CurrentContext]
	if kctx == nil || cfg.AuthInfos[kctx.AuthInfo] == nil {
		return "", fmt.Errorf("%s: no current context with credentials", c.Kubeconfig)
	}
	auth := cfg.AuthInfos[kctx.AuthInfo].DeepCopy()
	auth.Impersonate = user
	name := "agent-sandbox-" + suffix
	cfg.AuthInfos[name] = auth
	kctx = kctx.DeepCopy()
	kctx.AuthInfo = name
	cfg.Contexts[name] = kctx
	cfg.CurrentContext = name
	path := c.Kubeconfig + "." + suffix
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("writing the %s's kubeconfig: %w", suffix, err)
	}
	return path, nil
}

// applyYAML server-side applies every object of the YAML documents.
func applyYAML(ctx context.Context, cl client.Client, docs ...[]byte) error {
	for _, doc := range docs {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(doc), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("embedded RBAC: %w", err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			if err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
				return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	return nil
}
