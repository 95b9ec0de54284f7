package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/policy"
)

// finding is one validation error or policy decision, for text or JSON.
type finding struct {
	File     string           `json:"file"`
	Document int              `json:"document"`
	Line     int              `json:"line"`
	Object   string           `json:"object"`
	Field    string           `json:"field,omitempty"`
	Message  string           `json:"message"`
	Decision *policy.Decision `json:"decision,omitempty"`
}

func writeFindings(w io.Writer, format string, findings []finding, summary string) error {
	// A stable order whatever order the validators report in.
	sort.SliceStable(findings, func(i, j int) bool {
		a, b := findings[i], findings[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Document != b.Document {
			return a.Document < b.Document
		}
		if a.Field != b.Field {
			return a.Field < b.Field
		}
		return a.Message < b.Message
	})
	switch format {
	case "", "text":
		for _, f := range findings {
			loc := fmt.Sprintf("%s: document %d (line %d): %s", f.File, f.Document, f.Line, f.Object)
			if f.Field != "" {
				loc += ": " + f.Field
			}
			_, _ = fmt.Fprintf(w, "%s: %s\n", loc, f.Message)
		}
		_, _ = fmt.Fprintln(w, summary)
	case "json":
		if findings == nil {
			findings = []finding{}
		}
		b, err := json.MarshalIndent(findings, "", "  ")
		if err != nil {
			return err
		}
		_, _ = fmt.Fprintln(w, string(b))
	default:
		return &inputError{fmt.Sprintf("-o %s: want text or json", format)}
	}
	return nil
}

func objectName(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + u.GetName()
}

func runValidate(o *options, stdin io.Reader, stdout io.Writer) (int, error) {
	docs, err := readManifests(o.files, o.recursive, stdin)
	if err != nil {
		return 0, err
	}
	schemas, err := policy.BuiltinSchemas()
	if err != nil {
		return 0, err
	}
	var findings []finding
	skipped := 0
	for _, d := range docs {
		gvk := d.Obj.GroupVersionKind()
		if gvk.Group != sandboxv1beta1.GroupVersion.Group && gvk.Group != extv1beta1.GroupVersion.Group {
			skipped++
			continue
		}
		for _, e := range schemas.Validate(context.Background(), d.Obj, nil) {
			findings = append(findings, finding{File: d.File, Document: d.Index, Line: d.Line, Object: objectName(d.Obj),
				Field: e.Field, Message: strings.TrimPrefix(e.ErrorBody(), e.Field+": ")})
		}
	}
	summary := fmt.Sprintf("%d documents, %d errors", len(docs), len(findings))
	if skipped > 0 {
		summary += fmt.Sprintf(" (%d not agent-sandbox kinds, not validated)", skipped)
	}
	if err := writeFindings(stdout, o.output, findings, summary); err != nil {
		return 0, err
	}
	if len(findings) > 0 {
		return exitFindings, nil
	}
	return exitOK, nil
}
