package webhooks

import (
	"context"
	"errors"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	"github.com/agentsandbox/reconciler/policy"
)

const controllerUser = "system:serviceaccount:agent-sandbox-system:agent-sandbox-controller"

func controllerRef(kind, name, uid string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: extv1beta1.GroupVersion.String(), Kind: kind, Name: name, UID: k8stypes.UID("uid-" + uid), Controller: ptr.To(true)}
}

func owned(o client.Object, refs ...metav1.OwnerReference) client.Object {
	o.SetOwnerReferences(refs)
	return o
}

func claimObject() *extv1beta1.SandboxClaim {
	return &extv1beta1.SandboxClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: "default"},
		Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "pool"}},
	}
}

// TestOwnershipCannotBeForged: only the controller's ServiceAccount may
// make a Sandbox or claim controlled by a pool or claim; updates that keep
// the reference the object had are anyone's. Checked with and without
// policies (the check does not depend on them).
func TestOwnershipCannotBeForged(t *testing.T) {
	pool := controllerRef("SandboxWarmPool", "pool", "1")
	claim := controllerRef("SandboxClaim", "mine", "2")
	other := controllerRef("SandboxClaim", "theirs", "3")
	notController := pool
	notController.Controller = nil
	deployment := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "uid-4", Controller: ptr.To(true)}
	lookalike := controllerRef("SandboxWarmPool", "pool", "5")
	lookalike.APIVersion = "example.com/v1"
	lookalikeClaim := controllerRef("SandboxClaim", "mine", "2")
	lookalikeClaim.APIVersion = "evil.example.com/v1"

	cases := []struct {
		name    string
		op      admissionv1.Operation
		kind    string
		obj     client.Object
		old     client.Object
		user    string
		allowed bool
	}{
		{"user creates a pool member", admissionv1.Create, "Sandbox", owned(sandbox(), pool), nil, "alice", false},
		{"user creates a claim's Sandbox", admissionv1.Create, "Sandbox", owned(sandbox(), claim), nil, "alice", false},
		{"controller creates a pool member", admissionv1.Create, "Sandbox", owned(sandbox(), pool), nil, controllerUser, true},
		{"another ServiceAccount", admissionv1.Create, "Sandbox", owned(sandbox(), pool), nil, "system:serviceaccount:default:agent-sandbox-controller", false},
		{"user takes a pool member for a claim", admissionv1.Update, "Sandbox", owned(sandbox(), claim), owned(sandbox(), pool), "alice", false},
		{"controller moves a member to a claim", admissionv1.Update, "Sandbox", owned(sandbox(), claim), owned(sandbox(), pool), controllerUser, true},
		{"user moves a Sandbox to another claim", admissionv1.Update, "Sandbox", owned(sandbox(), other), owned(sandbox(), claim), "alice", false},
		{"user adds a pool to their Sandbox", admissionv1.Update, "Sandbox", owned(sandbox(), pool), sandbox(), "alice", false},
		{"GitOps re-applies a member unchanged", admissionv1.Update, "Sandbox", owned(sandbox(), pool), owned(sandbox(), pool), "argocd", true},
		{"user removes the reference", admissionv1.Update, "Sandbox", sandbox(), owned(sandbox(), pool), "alice", true},
		{"user creates a claim owned by a claim", admissionv1.Create, "SandboxClaim", owned(claimObject(), claim), nil, "alice", false},
		{"user creates a claim owned by a pool", admissionv1.Create, "SandboxClaim", owned(claimObject(), pool), nil, "alice", false},
		{"a plain claim", admissionv1.Create, "SandboxClaim", claimObject(), nil, "alice", true},
		{"a non-controller reference", admissionv1.Create, "Sandbox", owned(sandbox(), notController), nil, "alice", true},
		{"another controller kind", admissionv1.Create, "Sandbox", owned(sandbox(), deployment), nil, "alice", true},
		// A pool or claim of another group with our pool's UID is how a
		// forged member would be made: the kind is guarded in every group.
		{"same kind, another group", admissionv1.Create, "Sandbox", owned(sandbox(), lookalike), nil, "alice", false},
		{"a claim of another group", admissionv1.Create, "Sandbox", owned(sandbox(), lookalikeClaim), nil, "alice", false},
		{"a lookalike added to one's Sandbox", admissionv1.Update, "Sandbox", owned(sandbox(), lookalike), sandbox(), "alice", false},
		{"our pool swapped for a lookalike", admissionv1.Update, "Sandbox", owned(sandbox(), lookalike), owned(sandbox(), pool), "alice", false},
	}
	for _, policies := range []bool{true, false} {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				v := &Validator{Policy: &policy.Holder{}, ControllerUser: controllerUser}
				if policies {
					v = validator(t, policy.DefaultBundles...)
					v.ControllerUser = controllerUser
				}
				var old runtime.Object
				if tc.old != nil {
					old = tc.old
				}
				req := request(t, tc.op, tc.kind, tc.obj, old)
				req.UserInfo = authenticationv1.UserInfo{Username: tc.user}
				resp := v.Handle(context.Background(), req)
				if resp.Allowed != tc.allowed {
					t.Fatalf("policies %v: allowed=%v, want %v (%s)", policies, resp.Allowed, tc.allowed, resp.Result.Message)
				}
				if !tc.allowed && (resp.Result.Code != 403 || !strings.Contains(resp.Result.Message, "only the agent-sandbox controller ("+controllerUser+")") ||
					!strings.Contains(resp.Result.Message, `"`+tc.user+`"`)) {
					t.Errorf("refusal: code %d, %q", resp.Result.Code, resp.Result.Message)
				}
			})
		}
	}
}

// TestOwnershipWithoutAControllerUser: with no controller identity
// configured nobody may set such a reference (fail closed).
func TestOwnershipWithoutAControllerUser(t *testing.T) {
	v := validator(t, policy.DefaultBundles...)
	req := request(t, admissionv1.Create, "Sandbox", owned(sandbox(), controllerRef("SandboxWarmPool", "pool", "1")), nil)
	req.UserInfo = authenticationv1.UserInfo{Username: controllerUser}
	if resp := v.Handle(context.Background(), req); resp.Allowed {
		t.Fatal("allowed without a configured controller identity")
	}
}

// failingReader fails every read with err.
type failingReader struct{ err error }

func (r failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return r.err
}

func (r failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return r.err
}

// TestValidatorFailsClosed: what cannot be rendered, or whose template or
// pool cannot be read, is refused; a template or pool that does not exist
// yet is not (it may be created later, and the controller checks before it
// creates anything).
func TestValidatorFailsClosed(t *testing.T) {
	ctx := context.Background()
	v := validator(t, policy.DefaultBundles...)

	// The Service of a Sandbox is named after it: "9lives" cannot be.
	unrenderable := sandbox()
	unrenderable.Name = "9lives"
	unrenderable.Spec.Service = ptr.To(true)
	resp := v.Handle(ctx, request(t, admissionv1.Create, "Sandbox", unrenderable, nil))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "cannot be checked against the policies") || !strings.Contains(resp.Result.Message, "not a valid Service name") {
		t.Errorf("unrenderable Sandbox: allowed=%v %q", resp.Allowed, resp.Result.Message)
	}

	pool := &extv1beta1.SandboxWarmPool{
		TypeMeta:   metav1.TypeMeta{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxWarmPool"},
		ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "default"},
		Spec:       extv1beta1.SandboxWarmPoolSpec{TemplateRef: extv1beta1.SandboxTemplateRef{Name: "tpl"}},
	}
	cold := claimObject()
	cold.Spec.Env = []extv1beta1.EnvVar{{Name: "A", Value: "b"}}
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: extv1beta1.GroupVersion.Group, Resource: "sandboxtemplates"}, "tpl")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: extv1beta1.GroupVersion.Group, Resource: "sandboxtemplates"}, "tpl", errors.New("no"))
	for _, tc := range []struct {
		name    string
		kind    string
		obj     client.Object
		err     error
		allowed bool
	}{
		{"pool, template not created yet", "SandboxWarmPool", pool, notFound, true},
		{"pool, template unreadable", "SandboxWarmPool", pool, forbidden, false},
		{"cold claim, pool not created yet", "SandboxClaim", cold, notFound, true},
		{"cold claim, pool unreadable", "SandboxClaim", cold, forbidden, false},
		{"warm claim, pool unreadable (nothing to render)", "SandboxClaim", claimObject(), forbidden, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := validator(t, policy.DefaultBundles...)
			v.Reader = failingReader{tc.err}
			resp := v.Handle(ctx, request(t, admissionv1.Create, tc.kind, tc.obj, nil))
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed=%v, want %v (%q)", resp.Allowed, tc.allowed, resp.Result.Message)
			}
			// Refused as a server error naming what could not be read.
			if !tc.allowed && (resp.Result.Code != 500 || !strings.Contains(resp.Result.Message, "reading Sandbox")) {
				t.Errorf("refusal: code %d, %q", resp.Result.Code, resp.Result.Message)
			}
		})
	}
}

// TestValidatorConvertsV1alpha1: a deprecated-version object is judged as
// the v1beta1 object it is stored as.
func TestValidatorConvertsV1alpha1(t *testing.T) {
	v := validator(t, policy.DefaultBundles...)
	raw := []byte(`{"apiVersion":"extensions.agents.x-k8s.io/v1alpha1","kind":"SandboxTemplate","metadata":{"name":"tpl","namespace":"default"},
"spec":{"podTemplate":{"spec":{"runtimeClassName":"gvisor","containers":[{"name":"agent","image":"a","securityContext":{"privileged":true}}]}}}}`)
	req := request(t, admissionv1.Create, "SandboxTemplate", &corev1.ConfigMap{}, nil)
	req.Kind = metav1.GroupVersionKind{Group: extv1beta1.GroupVersion.Group, Version: "v1alpha1", Kind: "SandboxTemplate"}
	req.Object.Raw = raw
	resp := v.Handle(context.Background(), req)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "privileged containers are not allowed: agent") {
		t.Errorf("v1alpha1 privileged template: allowed=%v %q", resp.Allowed, resp.Result.Message)
	}
	req.Kind.Version = "v9"
	if resp := v.Handle(context.Background(), req); resp.Allowed {
		t.Error("an unknown version was admitted unchecked")
	}
}
