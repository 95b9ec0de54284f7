package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/agentsandbox/reconciler/policy"
)

// policySources are the configured policies, every built-in bundle and
// the files given, with the bundles' modes: as --bundle says, else the
// controller's defaults unless --policy is given (then all off).
func policySources(o *options) ([]policy.Source, policy.Modes, error) {
	modes := policy.DefaultModes()
	if len(o.bundles) > 0 || len(o.policies) > 0 {
		var err error
		if modes, err = policy.ParseModes(strings.Join(o.bundles, ",")); err != nil {
			return nil, nil, &inputError{"--bundle: " + err.Error()}
		}
	}
	var bundles, srcs []policy.Source
	for _, b := range policy.Bundles() {
		src, err := policy.Bundle(b)
		if err != nil {
			return nil, nil, &inputError{err.Error()}
		}
		bundles = append(bundles, src)
	}
	for _, p := range o.policies {
		info, err := os.Stat(p)
		if err != nil {
			return nil, nil, &inputError{err.Error()}
		}
		if info.IsDir() {
			more, err := policy.Config{Dir: p}.Sources()
			if err != nil {
				return nil, nil, &inputError{err.Error()}
			}
			srcs = append(srcs, more...)
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, &inputError{err.Error()}
		}
		srcs = append(srcs, policy.Source{Name: p, Data: data})
	}
	return append(policy.Unshadowed(bundles, modes, srcs), srcs...), modes, nil
}

// loadPolicies loads the configured policies into a holder whose
// namespaces' modes come from labels (nil: the defaults everywhere).
func loadPolicies(o *options, labels func(ctx context.Context, namespace string) map[string]string) (*policy.Holder, error) {
	srcs, modes, err := policySources(o)
	if err != nil {
		return nil, err
	}
	set, err := policy.Config{Modes: modes}.LoadSources(srcs)
	if err != nil {
		return nil, &inputError{"invalid policy: " + err.Error()}
	}
	h := &policy.Holder{NamespaceLabels: labels, Exempt: []string{o.controllerNS, "kube-system"}}
	h.Set(set)
	return h, nil
}

// manifestNamespaceLabels reads the labels of the Namespaces among the
// manifests: their mode labels apply to the objects in them, as they
// will in the cluster.
func manifestNamespaceLabels(docs []document) func(context.Context, string) map[string]string {
	byName := map[string]map[string]string{}
	for _, d := range docs {
		if d.Obj.GetKind() == "Namespace" && d.Obj.GroupVersionKind().Group == "" {
			byName[d.Obj.GetName()] = d.Obj.GetLabels()
		}
	}
	return func(_ context.Context, ns string) map[string]string { return byName[ns] }
}

func runPolicyCheck(o *options, stdin io.Reader, stdout io.Writer) (int, error) {
	// Policies first: an invalid policy is reported before the manifests
	// are read. Namespace labels come from the manifests once read.
	labels := func(context.Context, string) map[string]string { return nil }
	holder, err := loadPolicies(o, func(ctx context.Context, ns string) map[string]string { return labels(ctx, ns) })
	if err != nil {
		return 0, err
	}
	set := holder.Get()
	docs, err := readManifests(o.files, o.recursive, stdin)
	if err != nil {
		return 0, err
	}
	labels = manifestNamespaceLabels(docs)
	var findings []finding
	denied, unchecked, unrenderable := 0, 0, 0
	for _, r := range renderAll(o, docs) {
		objs := append(append([]any{r.doc.Obj}, r.objects...), r.checks...)
		gvks := append(append([]schema.GroupVersionKind{r.doc.Obj.GroupVersionKind()}, r.gvks...), r.checkGVKs...)
		if r.problem != "" {
			// Only the object itself can be judged. Say so: a pool or
			// template elsewhere is the user's to add; anything else
			// would be refused by the controller and the webhook too.
			objs, gvks = objs[:1], gvks[:1]
			unchecked++
			what := "not rendered, so what it makes was not checked: "
			if !r.missing {
				unrenderable++
				what = "cannot be rendered (the controller and the webhook refuse it): "
			}
			findings = append(findings, finding{File: r.doc.File, Document: r.doc.Index, Line: r.doc.Line,
				Object: objectName(r.doc.Obj), Message: what + r.problem})
		}
		ctx, problems := holder.In(context.Background(), r.doc.Obj.GetNamespace())
		for _, p := range problems {
			findings = append(findings, finding{File: r.doc.File, Document: r.doc.Index, Line: r.doc.Line, Object: objectName(r.doc.Obj), Message: p})
		}
		seen := map[string]bool{}
		for i, obj := range objs {
			if _, passthrough := obj.(*unstructured.Unstructured); passthrough && i > 0 {
				continue // the input again
			}
			ds, err := set.CheckAs(ctx, gvks[i], obj)
			if err != nil {
				continue // not a kind policies check
			}
			for _, d := range ds {
				key := d.String()
				if seen[key] {
					continue
				}
				seen[key] = true
				dd := d
				if d.Action == policy.Deny {
					denied++
				}
				findings = append(findings, finding{File: r.doc.File, Document: r.doc.Index, Line: r.doc.Line,
					Object: objectName(r.doc.Obj), Message: d.String(), Decision: &dd})
			}
		}
	}
	summary := fmt.Sprintf("%d documents, %d denied, %d warnings or audits", len(docs), denied, len(findings)-denied-unchecked)
	if n := unchecked - unrenderable; n > 0 {
		summary += fmt.Sprintf(", %d not fully checked", n)
	}
	if unrenderable > 0 {
		summary += fmt.Sprintf(", %d not renderable", unrenderable)
	}
	summary += fmt.Sprintf(" (policies: %s)", strings.Join(set.Active(context.Background()), ", "))
	if err := writeFindings(stdout, o.output, findings, summary); err != nil {
		return 0, err
	}
	if denied > 0 || unrenderable > 0 {
		return exitFindings, nil
	}
	return exitOK, nil
}

func runPolicyExport(o *options, stdout io.Writer) (int, error) {
	srcs, modes, err := policySources(o)
	if err != nil {
		return 0, err
	}
	if _, err := (policy.Config{Modes: modes}).LoadSources(srcs); err != nil {
		return 0, &inputError{"invalid policy: " + err.Error()}
	}
	first := true
	for _, s := range srcs {
		if s.Bundle != "" {
			if modes.Of(s.Bundle) == policy.ModeOff {
				continue
			}
			if s, err = s.InMode(modes.Of(s.Bundle)); err != nil {
				return 0, err
			}
		}
		if !first {
			_, _ = fmt.Fprintln(stdout, "---")
		}
		first = false
		_, _ = fmt.Fprintf(stdout, "# from %s\n", s.Name)
		_, _ = stdout.Write([]byte(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(s.Data)), "---")) + "\n"))
	}
	return exitOK, nil
}
