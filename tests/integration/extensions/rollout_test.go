package extensions

import (
	"fmt"
	"slices"
	"testing"
	"time"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// TestWarmPoolRolloutFollowsTemplateRef: pointing a pool's
// sandboxTemplateRef at another template of identical spec makes its
// members stale, as upstream's pool decides (by the template reference):
// under Recreate they are replaced by members made from the new template,
// under OnReplenish they stay until claimed.
func TestWarmPoolRolloutFollowsTemplateRef(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	recreate := newPool(ns, "fresh", "tpl", 2)
	recreate.Spec.UpdateStrategy = &extv1beta1.UpdateStrategy{Type: extv1beta1.UpdateStrategyRecreate}
	create(t, newTemplate(ns, "tpl"), newTemplate(ns, "tpl2"), recreate, newPool(ns, "keep", "tpl", 2))
	_, freshBefore := waitPool(t, ns, "fresh", 2)
	_, keepBefore := waitPool(t, ns, "keep", 2)

	for _, name := range []string{"fresh", "keep"} {
		change(t, ns, name, &extv1beta1.SandboxWarmPool{}, func(p *extv1beta1.SandboxWarmPool) { p.Spec.TemplateRef.Name = "tpl2" })
	}
	eventually(t, "Recreate replaces the members made from tpl", func() error {
		_, m := waitPool(t, ns, "fresh", 2)
		for _, sb := range m {
			if slices.Contains(names(freshBefore), sb.Name) || sb.Annotations[sandboxv1beta1.AnnotationSandboxTemplateRef] != "tpl2" {
				return fmt.Errorf("member %s is made from %s", sb.Name, sb.Annotations[sandboxv1beta1.AnnotationSandboxTemplateRef])
			}
		}
		return nil
	})
	time.Sleep(time.Second)
	if _, m := waitPool(t, ns, "keep", 2); !slices.Equal(names(m), names(keepBefore)) {
		t.Errorf("OnReplenish replaced members on a new template reference: %v -> %v", names(keepBefore), names(m))
	}
}
