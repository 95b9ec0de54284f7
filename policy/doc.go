// Package policy evaluates CEL policies, written as ValidatingAdmissionPolicy
// YAML, against our objects and the objects rendered from them, with the CEL
// environment and cost limits of k8s.io/apiserver so an expression behaves as
// it would in the API server; it also validates objects offline against the
// generated CRD schemas and their x-kubernetes-validations.
//
// Decisions are data (policy, binding, rule, action, message). The package
// must never talk to a cluster.
package policy
