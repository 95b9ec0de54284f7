package kubectlplugin

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// Name is a claim or Sandbox a command can reach by name.
type Name struct {
	Name string
	// Kind is SandboxClaim or Sandbox.
	Kind string
}

// kinds are listed in this order: claims first, as users name them.
var kinds = []struct {
	kind string
	gvr  schema.GroupVersionResource
}{
	{"SandboxClaim", extv1beta1.GroupVersion.WithResource("sandboxclaims")},
	{"Sandbox", sandboxv1beta1.GroupVersion.WithResource("sandboxes")},
}

// Names lists the SandboxClaims and Sandboxes in namespace whose names
// start with prefix (object metadata only), claims first, each sorted. A
// kind the API server does not serve or the user may not list is left out;
// an error is returned only when no kind could be listed.
func Names(ctx context.Context, cfg *rest.Config, namespace, prefix string) ([]Name, error) {
	c, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	var names []Name
	var errs []string
	for _, k := range kinds {
		list, err := c.Resource(k.gvr).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			errs = append(errs, fmt.Sprintf("listing %s: %v", k.gvr.GroupResource(), err))
			continue
		}
		var these []Name
		for _, it := range list.Items {
			if strings.HasPrefix(it.Name, prefix) {
				these = append(these, Name{Name: it.Name, Kind: k.kind})
			}
		}
		slices.SortFunc(these, func(a, b Name) int { return strings.Compare(a.Name, b.Name) })
		names = append(names, these...)
	}
	if len(errs) == len(kinds) {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return names, nil
}

// Namespaces lists the namespaces whose names start with prefix, sorted
// (for -n completion, as kubectl's).
func Namespaces(ctx context.Context, cfg *rest.Config, prefix string) ([]string, error) {
	c, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	list, err := c.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	var names []string
	for _, it := range list.Items {
		if strings.HasPrefix(it.Name, prefix) {
			names = append(names, it.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}
