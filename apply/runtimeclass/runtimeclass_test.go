package runtimeclass

import (
	"context"
	"errors"
	"testing"

	"github.com/go-logr/logr"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

var allowlist = []string{"gvisor", "kata", "kata-qemu", "kata-clh", "kata-fc"}

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name, setting string
		existing      []string
		want          string
	}{
		{"auto, nothing installed", Auto, nil, ""},
		{"auto, only non-isolating classes", Auto, []string{"runc", "crun"}, ""},
		{"auto, gvisor", Auto, []string{"runc", "gvisor"}, "gvisor"},
		{"auto, allowlist order wins over cluster order", Auto, []string{"kata-fc", "kata", "gvisor"}, "gvisor"},
		{"auto, kata before kata-qemu", Auto, []string{"kata-qemu", "kata"}, "kata"},
		{"auto, only kata-clh", Auto, []string{"kata-clh"}, "kata-clh"},
		{"none", None, []string{"gvisor"}, ""},
		{"a name is used as is", "kata-qemu", nil, "kata-qemu"},
		{"even one outside the allowlist", "runc", []string{"gvisor"}, "runc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Resolve(tc.setting, allowlist, tc.existing); got != tc.want {
				t.Errorf("Resolve(%q, %v) = %q, want %q", tc.setting, tc.existing, got, tc.want)
			}
		})
	}
}

func TestCheckSetting(t *testing.T) {
	for setting, ok := range map[string]bool{"auto": true, "none": true, "gvisor": true, "kata-qemu": true, "": true, "Not_A_Name": false, "-x": false} {
		if err := CheckSetting(setting); (err == nil) != ok {
			t.Errorf("CheckSetting(%q) = %v, want ok=%v", setting, err, ok)
		}
	}
}

// Under auto the default follows the RuntimeClasses as they come and go,
// in the allowlist's order.
func TestSourceFollowsTheCluster(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(rc("runc")).Build()
	s := New(Auto, policy.IsolatingRuntimeClasses(), c, logr.Discard())
	if !s.Dynamic() || !FollowsCluster(s) {
		t.Fatal("auto does not follow the cluster")
	}
	want := func(step, class string) {
		t.Helper()
		if got := render.CurrentDefaults(s).RuntimeClassName; got != class {
			t.Errorf("%s: default %q, want %q", step, got, class)
		}
	}
	want("only runc", "")
	must(t, c.Create(ctx, rc("kata-qemu")))
	want("kata-qemu added", "kata-qemu")
	must(t, c.Create(ctx, rc("gvisor")))
	want("gvisor added", "gvisor")
	must(t, c.Create(ctx, rc("kata")))
	want("kata added", "gvisor")
	must(t, c.Delete(ctx, rc("gvisor")))
	want("gvisor removed", "kata")
	must(t, c.Delete(ctx, rc("kata")))
	must(t, c.Delete(ctx, rc("kata-qemu")))
	want("all removed", "")
}

func TestSourceFixedSettings(t *testing.T) {
	broken := failingReader{}
	for setting, want := range map[string]string{None: "", "": "", "kata": "kata", "runc": "runc"} {
		s := New(setting, allowlist, broken, logr.Discard())
		if s.Dynamic() || FollowsCluster(s) {
			t.Errorf("%s follows the cluster", setting)
		}
		if got := s.Current().RuntimeClassName; got != want {
			t.Errorf("%s: default %q, want %q", setting, got, want)
		}
	}
	if !New("kata", allowlist, nil, logr.Discard()).Allowed("kata") || New("runc", allowlist, nil, logr.Discard()).Allowed("runc") {
		t.Error("Allowed does not follow the allowlist")
	}
	// A list that fails gives no default (the policy then refuses the Pod).
	if got := New(Auto, allowlist, broken, logr.Discard()).Current(); got != (render.Defaults{}) {
		t.Errorf("failed list: %+v, want no default", got)
	}
	var none *Source
	if none.Current() != (render.Defaults{}) || none.Dynamic() || FollowsCluster(render.Defaults{RuntimeClassName: "gvisor"}) {
		t.Error("a nil source or a fixed value follows something")
	}
}

func rc(name string) *nodev1.RuntimeClass {
	return &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: name}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type failingReader struct{ client.Reader }

func (failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("no cache")
}
