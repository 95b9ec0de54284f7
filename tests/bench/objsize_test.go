package bench

import (
	"context"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// ObjectSizes are the JSON sizes, as the API server returns them, of the
// objects a claim's three writes change: a Ready member before the burst,
// the first claim's member once taken, and that claim once Ready; with the
// field managers of each. The API server decodes, merges and encodes the
// whole object (managedFields included) at each write, and each watcher
// is sent all of it.
type ObjectSizes struct {
	Member         int      `json:"member_bytes"`
	MemberManagers []string `json:"member_managers"`
	Taken          int      `json:"taken_member_bytes"`
	TakenManagers  []string `json:"taken_member_managers"`
	Claim          int      `json:"ready_claim_bytes"`
	ClaimManagers  []string `json:"ready_claim_managers"`
}

// readSize returns the JSON size and field managers of the object of kind
// (of apiVersion) ns/name, as the API server has it now, and the object.
func readSize(t *testing.T, c client.Client, kind, apiVersion, ns, name string) (int, []string, *unstructured.Unstructured) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		t.Fatalf("reading %s %s/%s: %v", kind, ns, name, err)
	}
	b, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	var managers []string
	for _, m := range u.GetManagedFields() {
		s := m.Manager + " " + string(m.Operation)
		if m.Subresource != "" {
			s += " " + m.Subresource
		}
		managers = append(managers, s)
	}
	return len(b), managers, u
}

// member sizes the warm member ns/name before the burst.
func (s *ObjectSizes) member(t *testing.T, c client.Client, ns, name string) {
	s.Member, s.MemberManagers, _ = readSize(t, c, "Sandbox", sandboxv1beta1.GroupVersion.String(), ns, name)
}

// claimed sizes claim ns/name, Ready, and the member it took.
func (s *ObjectSizes) claimed(t *testing.T, c client.Client, ns, name string) {
	var claim *unstructured.Unstructured
	s.Claim, s.ClaimManagers, claim = readSize(t, c, "SandboxClaim", extv1beta1.GroupVersion.String(), ns, name)
	sb, _, _ := unstructured.NestedString(claim.Object, "status", "sandbox", "name")
	s.Taken, s.TakenManagers, _ = readSize(t, c, "Sandbox", sandboxv1beta1.GroupVersion.String(), ns, sb)
}
