package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/agentsandbox/reconciler/api/convert"
)

func runRender(o *options, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	docs, err := readManifests(o.files, o.recursive, stdin)
	if err != nil {
		return 0, err
	}
	code := exitOK
	var items []any
	for _, r := range renderAll(o, docs) {
		if r.problem != "" {
			_, _ = fmt.Fprintf(stderr, "%s: %s %s: %s\n", r.doc.where(), r.doc.Obj.GetKind(), r.doc.Obj.GetName(), r.problem)
			code = exitFindings
			continue
		}
		items = append(items, r.objects...)
	}
	switch o.output {
	case "", "yaml":
		for i, it := range items {
			b, err := yaml.Marshal(it)
			if err != nil {
				return 0, err
			}
			if i > 0 {
				_, _ = fmt.Fprintln(stdout, "---")
			}
			_, _ = stdout.Write(b)
		}
	case "json":
		list := map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
		if items == nil {
			list["items"] = []any{}
		}
		b, err := json.MarshalIndent(list, "", "  ")
		if err != nil {
			return 0, err
		}
		_, _ = fmt.Fprintln(stdout, string(b))
	case "name":
		for _, it := range items {
			u, err := convert.Unstructured(it)
			if err != nil {
				return 0, err
			}
			_, _ = fmt.Fprintf(stdout, "%s/%s\n", strings.ToLower(u.GetKind()), u.GetName())
		}
	default:
		return 0, &inputError{fmt.Sprintf("-o %s: want yaml, json or name", o.output)}
	}
	return code, nil
}
