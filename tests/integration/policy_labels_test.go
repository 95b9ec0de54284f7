package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/agentsandbox/reconciler/tests"
)

// TestPolicyModeLabelsOnlyTighten installs config/policy-labels (the
// ValidatingAdmissionPolicy shipped off by default for clusters whose
// tenants may label their namespaces), bound to this test's namespaces
// only, and labels namespaces as a tenant who may update them: labels that
// tighten the cluster's modes (or leave them, or remove them) are admitted,
// ones that loosen them are refused with a message naming the label; a
// user allowed to relax policy modes (here cluster-admin) may loosen them.
func TestPolicyModeLabelsOnlyTighten(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	dir := filepath.Join(tests.RepoRoot(), "config", "policy-labels")
	read := func(file string, into ...any) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		docs := strings.Split(string(data), "\n---\n")
		if len(docs) != len(into) {
			t.Fatalf("%s has %d documents, want %d", file, len(docs), len(into))
		}
		for i, d := range docs {
			if err := yaml.UnmarshalStrict([]byte(d), into[i]); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
		}
	}
	vap, binding := &admissionv1.ValidatingAdmissionPolicy{}, &admissionv1.ValidatingAdmissionPolicyBinding{}
	modes, relaxer := &corev1.ConfigMap{}, &rbacv1.ClusterRole{}
	read("policy.yaml", vap, binding)
	read("modes.yaml", modes)
	read("rbac.yaml", relaxer)
	if modes.Data["baseline"] != "enforce" || modes.Data["restricted"] != "off" {
		t.Fatalf("the shipped modes %v are not the controller's defaults", modes.Data)
	}
	// Only namespaces labelled for this test, and params in its namespace.
	name := "mode-labels-" + ns
	vap.Name, binding.Name, binding.Spec.PolicyName = name, name, name
	binding.Spec.ParamRef.Namespace = ns
	binding.Spec.MatchResources = &admissionv1.MatchResources{ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"mode-labels-test": ns}}}
	modes.Namespace = ns
	tenant := "tenant-" + ns
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: tenant},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create", "update", "patch"}}}}
	roleBinding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: tenant},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: tenant}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: tenant}}
	// A second user gets the shipped relaxer role on top.
	relaxerName := "relaxer-" + ns
	relaxer.Name = relaxerName
	relaxerBindings := []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: relaxerName},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: relaxerName}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: relaxerName}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: relaxerName + "-ns"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: relaxerName}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: tenant}},
	}
	for _, o := range append([]client.Object{modes, vap, binding, role, roleBinding, relaxer}, relaxerBindings...) {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %T: %v", o, err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: tenant}
	asTenant, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}

	// A namespace of the tenant's, with an exception an administrator made.
	target := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns + "-t", Labels: map[string]string{
		"mode-labels-test": ns, "policy.agents.x-k8s.io/runtime-isolation": "warn"}}}
	if err := env.Client.Create(ctx, target); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), target) })
	label := func(c client.Client, set map[string]string, remove ...string) error {
		cur := &corev1.Namespace{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(target), cur); err != nil {
			t.Fatal(err)
		}
		for k, v := range set {
			cur.Labels[k] = v
		}
		for _, k := range remove {
			delete(cur.Labels, k)
		}
		return c.Update(ctx, cur)
	}
	// The policy takes effect once the API server has loaded it.
	deadline := time.Now().Add(time.Minute)
	for {
		err := label(asTenant, map[string]string{"policy.agents.x-k8s.io/baseline": "off"})
		if err != nil && strings.Contains(err.Error(), "may only tighten") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy never took effect (last: %v)", err)
		}
		_ = label(env.Client, nil, "policy.agents.x-k8s.io/baseline")
		time.Sleep(200 * time.Millisecond)
	}

	cases := []struct {
		name   string
		set    map[string]string
		remove []string
		want   string // "" = admitted
	}{
		{name: "baseline warn loosens enforce", set: map[string]string{"policy.agents.x-k8s.io/baseline": "warn"},
			want: "policy.agents.x-k8s.io/baseline=warn is looser than the cluster's enforce"},
		{name: "baseline audit", set: map[string]string{"policy.agents.x-k8s.io/baseline": "audit"}, want: "baseline=audit"},
		{name: "runtime-isolation off", set: map[string]string{"policy.agents.x-k8s.io/runtime-isolation": "off"}, want: "runtime-isolation=off"},
		{name: "legacy webhook opt-out", set: map[string]string{"agents.x-k8s.io/policy-webhook": "disabled"}, want: "keeps the policy webhook out"},
		{name: "baseline enforce equals the cluster", set: map[string]string{"policy.agents.x-k8s.io/baseline": "enforce"}},
		{name: "restricted warn tightens off", set: map[string]string{"policy.agents.x-k8s.io/restricted": "warn"}},
		{name: "restricted enforce", set: map[string]string{"policy.agents.x-k8s.io/restricted": "enforce"}},
		{name: "a typo enforces", set: map[string]string{"policy.agents.x-k8s.io/baseline": "Off"}},
		{name: "another label, the administrator's exception kept", set: map[string]string{"team": "a"}},
		{name: "removing a label follows the cluster", remove: []string{"policy.agents.x-k8s.io/runtime-isolation"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := label(asTenant, tc.set, tc.remove...)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("admitted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("refused with %q, want %q", err, tc.want)
			}
		})
	}
	// Whoever may relax policy modes may loosen them: a user bound to
	// the shipped relaxer ClusterRole, and cluster-admin.
	rcfg := rest.CopyConfig(env.Config)
	rcfg.Impersonate = rest.ImpersonationConfig{UserName: relaxerName}
	asRelaxer, err := client.New(rcfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := label(asRelaxer, map[string]string{"policy.agents.x-k8s.io/baseline": "warn"}); err != nil {
		t.Errorf("a user with the relaxer role refused: %v", err)
	}
	if err := label(env.Client, map[string]string{"policy.agents.x-k8s.io/baseline": "off"}); err != nil {
		t.Errorf("cluster-admin refused: %v", err)
	}
	// A namespace the tenant creates is judged the same way.
	loose := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns + "-new", Labels: map[string]string{
		"mode-labels-test": ns, "policy.agents.x-k8s.io/baseline": "off"}}}
	if err := asTenant.Create(ctx, loose); err == nil || !strings.Contains(err.Error(), "baseline=off") {
		_ = env.Client.Delete(ctx, loose)
		t.Errorf("creating a loosened namespace: %v, want refused", err)
	}
}
