package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// RuntimeIsolationParams names the ConfigMap that holds the
// runtime-isolation bundle's allowlist (data.runtimeClasses).
const RuntimeIsolationParams = "agent-sandbox-runtime-isolation"

// IsolatingRuntimeClasses returns the allowlist of the built-in
// runtime-isolation bundle, in its order (gvisor first): the runtime
// classes that isolate a sandbox. The controller's default runtime class
// is the first of these the cluster has.
func IsolatingRuntimeClasses() []string {
	src, err := Bundle(BundleRuntimeIsolation)
	if err != nil {
		panic(err) // the bundle is embedded
	}
	classes, err := runtimeClassesParam(src)
	if err != nil {
		panic(err) // tested: the embedded bundle has the param
	}
	return classes
}

// runtimeClassesParam reads data.runtimeClasses of the params ConfigMap in
// a runtime-isolation source, split at commas and trimmed as the policy's
// CEL does.
func runtimeClassesParam(src Source) ([]string, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(src.Data), 4096)
	for {
		var d struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Data map[string]string `json:"data"`
		}
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", src.Name, err)
		}
		if d.Kind != "ConfigMap" || d.Metadata.Name != RuntimeIsolationParams {
			continue
		}
		var out []string
		for _, c := range strings.Split(d.Data["runtimeClasses"], ",") {
			if c = strings.TrimSpace(c); c != "" {
				out = append(out, c)
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%s: ConfigMap %s has no data.runtimeClasses", src.Name, RuntimeIsolationParams)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: no ConfigMap %s", src.Name, RuntimeIsolationParams)
}
