package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/agentsandbox/reconciler/tests"
)

// ReleaseName is the release name the tests install the chart as.
const ReleaseName = "agent-sandbox"

// Namespace is the kustomize bundle's namespace, the one the tests install
// the chart in to compare them.
const Namespace = "agent-sandbox-system"

// ChartDir returns the chart's directory.
func ChartDir() string { return filepath.Join(tests.RepoRoot(), "charts", "agent-sandbox") }

// KubeVersion is the Kubernetes version the chart is rendered for offline.
var KubeVersion = func() *common.KubeVersion {
	v, err := common.ParseKubeVersion("v1.34.0")
	if err != nil {
		panic(err)
	}
	return v
}()

// Template renders the chart as `helm template` does (no cluster), with
// values, as release ReleaseName in namespace.
func Template(ctx context.Context, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	rel, err := template(ctx, namespace, values)
	if err != nil {
		return nil, err
	}
	return Decode(strings.NewReader(rel.Manifest))
}

func template(ctx context.Context, namespace string, values map[string]any) (*release.Release, error) {
	ch, err := loader.Load(ChartDir())
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	inst := action.NewInstall(action.NewConfiguration())
	inst.DryRunStrategy = action.DryRunClient
	inst.Replace = true
	inst.ReleaseName = ReleaseName
	inst.Namespace = namespace
	inst.KubeVersion = KubeVersion
	r, err := inst.RunWithContext(ctx, ch, values)
	if err != nil {
		return nil, fmt.Errorf("rendering the chart: %w", err)
	}
	rel, ok := r.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("rendering the chart: unexpected release type %T", r)
	}
	return rel, nil
}

// Lint runs `helm lint --strict` on the chart with values and returns
// every message at warning level or above.
func Lint(values map[string]any) []error {
	l := action.NewLint()
	l.Strict = true
	l.Namespace = Namespace
	l.KubeVersion = KubeVersion
	res := l.Run([]string{ChartDir()}, values)
	return res.Errors
}

// Kustomize builds a kustomization of config/ (e.g. "default") with
// krusty, as `kustomize build config/<dir>` does.
func Kustomize(dir string) ([]*unstructured.Unstructured, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(tests.RepoRoot(), "config", dir))
	if err != nil {
		return nil, fmt.Errorf("kustomize build config/%s: %w", dir, err)
	}
	y, err := m.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize build config/%s: %w", dir, err)
	}
	return Decode(bytes.NewReader(y))
}

// Decode splits a YAML stream into objects, skipping empty documents.
func Decode(r io.Reader) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decoding YAML: %w", err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}
