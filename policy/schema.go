package policy

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	schemacel "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/agentsandbox/reconciler/config/crd"
)

// Schemas validates objects offline against CRD schemas, with the API
// server's own machinery: unknown fields (as strict field validation
// reports them), defaulting, the OpenAPI schema, and the
// x-kubernetes-validations CEL rules (including transition rules, given the
// old object).
type Schemas struct {
	versions map[schema.GroupVersionKind]*crdVersion
}

type crdVersion struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *schemacel.Validator
	namespaced bool
}

// BuiltinSchemas are the schemas of our CRDs, built into the binary.
func BuiltinSchemas() (*Schemas, error) {
	defs, err := crd.Definitions()
	if err != nil {
		return nil, err
	}
	return NewSchemas(defs...)
}

// NewSchemas compiles CRD YAML documents.
func NewSchemas(crds ...[]byte) (*Schemas, error) {
	s := &Schemas{versions: map[schema.GroupVersionKind]*crdVersion{}}
	for _, data := range crds {
		def := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, def); err != nil {
			return nil, fmt.Errorf("decoding CRD: %w", err)
		}
		for _, v := range def.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			internal := &apiextensions.JSONSchemaProps{}
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
				return nil, fmt.Errorf("CRD %s %s: %w", def.Name, v.Name, err)
			}
			structural, err := structuralschema.NewStructural(internal)
			if err != nil {
				return nil, fmt.Errorf("CRD %s %s: %w", def.Name, v.Name, err)
			}
			validator, _, err := apiservervalidation.NewSchemaValidator(internal)
			if err != nil {
				return nil, fmt.Errorf("CRD %s %s: %w", def.Name, v.Name, err)
			}
			gvk := schema.GroupVersionKind{Group: def.Spec.Group, Version: v.Name, Kind: def.Spec.Names.Kind}
			s.versions[gvk] = &crdVersion{
				structural: structural, validator: validator,
				cel:        schemacel.NewValidator(structural, true, celconfig.PerCallLimit),
				namespaced: def.Spec.Scope == apiextensionsv1.NamespaceScoped,
			}
		}
	}
	return s, nil
}

// Knows reports whether the kind has a schema here.
func (s *Schemas) Knows(gvk schema.GroupVersionKind) bool {
	_, ok := s.versions[gvk]
	return ok
}

// Validate checks obj (and, for an update, old) the way the API server
// would on create or update. Errors carry the field path.
func (s *Schemas) Validate(ctx context.Context, obj, old *unstructured.Unstructured) field.ErrorList {
	gvk := obj.GroupVersionKind()
	v, ok := s.versions[gvk]
	if !ok {
		return field.ErrorList{field.NotSupported[string](field.NewPath("apiVersion"), gvk.GroupVersion().String()+" "+gvk.Kind, nil)}
	}
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	switch name := obj.GetName(); {
	case name == "" && obj.GetGenerateName() == "":
		errs = append(errs, field.Required(meta.Child("name"), "name or generateName is required"))
	case name != "":
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(meta.Child("name"), name, msg))
		}
	}

	cur := normalized(obj)
	unknown := pruning.PruneWithOptions(cur, v.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	for _, p := range unknown {
		errs = append(errs, field.Forbidden(field.NewPath(p), "unknown field: the schema has no such field"))
	}
	structuraldefaulting.Default(cur, v.structural)

	var prev any
	if old != nil {
		o := normalized(old)
		pruning.PruneWithOptions(o, v.structural, true, structuralschema.UnknownFieldPathOptions{})
		structuraldefaulting.Default(o, v.structural)
		prev = o
		errs = append(errs, apiservervalidation.ValidateCustomResourceUpdate(nil, cur, o, v.validator)...)
	} else {
		errs = append(errs, apiservervalidation.ValidateCustomResource(nil, cur, v.validator)...)
	}
	celErrs, _ := v.cel.Validate(ctx, nil, v.structural, cur, prev, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// normalized copies an object's content with integral numbers as int64, as
// the API server decodes JSON (YAML decoders give float64, which the schema
// and CEL validators would refuse for integer fields).
func normalized(u *unstructured.Unstructured) map[string]any {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return u.DeepCopy().Object
	}
	out := map[string]any{}
	if err := utiljson.Unmarshal(b, &out); err != nil {
		return u.DeepCopy().Object
	}
	return out
}
