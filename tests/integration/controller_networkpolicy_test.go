package integration

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/agentsandbox/reconciler/tests"
)

// TestControllerPodsAdmitOnlyTheWebhookAndMetrics reads the release bundles
// (dist/, made by make dist from config/): each has a NetworkPolicy that
// selects the controller's Pods and admits ingress only to the container
// ports named webhook (called by the API server) and metrics (served only
// to callers the API server authenticates and authorizes), and the API
// server accepts it.
func TestControllerPodsAdmitOnlyTheWebhookAndMetrics(t *testing.T) {
	for _, bundle := range []string{"install.yaml", "install-extensions.yaml"} {
		t.Run(bundle, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(tests.RepoRoot(), "dist", bundle))
			if err != nil {
				t.Fatal(err)
			}
			var np *networkingv1.NetworkPolicy
			var deploy *appsv1.Deployment
			for _, doc := range bytes.Split(data, []byte("\n---\n")) {
				var meta metav1.TypeMeta
				if err := yaml.Unmarshal(doc, &meta); err != nil {
					t.Fatal(err)
				}
				switch meta.Kind {
				case "NetworkPolicy":
					if np != nil {
						t.Fatalf("two NetworkPolicies in %s", bundle)
					}
					np = &networkingv1.NetworkPolicy{}
					if err := yaml.UnmarshalStrict(doc, np); err != nil {
						t.Fatal(err)
					}
				case "Deployment":
					deploy = &appsv1.Deployment{}
					if err := yaml.UnmarshalStrict(doc, deploy); err != nil {
						t.Fatal(err)
					}
				}
			}
			if np == nil || deploy == nil {
				t.Fatalf("%s: NetworkPolicy %v, Deployment %v", bundle, np != nil, deploy != nil)
			}
			if err := checkControllerPolicy(np, deploy); err != nil {
				t.Fatal(err)
			}
			// The API server takes it as it is (in this test's namespace).
			np.Namespace = env.Namespace(t)
			if err := env.Client.Create(context.Background(), np); err != nil {
				t.Fatalf("the API server refused the NetworkPolicy: %v", err)
			}
		})
	}
}

func checkControllerPolicy(np *networkingv1.NetworkPolicy, deploy *appsv1.Deployment) error {
	if np.Namespace != deploy.Namespace {
		return errors.New("the NetworkPolicy is not in the controller's namespace")
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		return err
	}
	if sel.Empty() || !sel.Matches(labels.Set(deploy.Spec.Template.Labels)) {
		return errors.New("the NetworkPolicy does not select the controller's Pods (or selects every Pod of the namespace, the router's too)")
	}
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		return errors.New("policyTypes must be [Ingress]")
	}
	named := map[string]bool{}
	for _, p := range deploy.Spec.Template.Spec.Containers[0].Ports {
		named[p.Name] = true
	}
	allowed := map[string]bool{}
	for _, rule := range np.Spec.Ingress {
		if len(rule.Ports) == 0 {
			return errors.New("an ingress rule admits every port")
		}
		for _, p := range rule.Ports {
			if p.Port == nil || p.Port.StrVal == "" || !named[p.Port.StrVal] || p.EndPort != nil ||
				p.Protocol == nil || *p.Protocol != corev1.ProtocolTCP {
				return errors.New("an ingress rule admits a port other than a named TCP port of the controller")
			}
			allowed[p.Port.StrVal] = true
		}
	}
	if len(allowed) != 2 || !allowed["webhook"] || !allowed["metrics"] {
		return errors.New("ingress must admit exactly the webhook and metrics ports")
	}
	return nil
}
