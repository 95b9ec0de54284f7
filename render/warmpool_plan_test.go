package render

import (
	"os"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests/golden"
)

// warmPoolObserved is a warm pool case's observed.yaml.
type warmPoolObserved struct {
	Members []*sandboxv1beta1.Sandbox `json:"members,omitempty"`
	// Claimed are former members a claim adopted (the claim controls
	// them). The reconciler never lists them as members; they are passed
	// with the members all the same, and the plan must neither count nor
	// delete them. Their names are taken.
	Claimed []*sandboxv1beta1.Sandbox `json:"claimed,omitempty"`
	Pending []string                  `json:"pending,omitempty"`
	// Held are names of members a claim holds as the pool withdraws
	// them (their adoption is in flight): the plan leaves them alone.
	Held  []string `json:"held,omitempty"`
	Taken []string `json:"taken,omitempty"`
	// NoTemplate renders as if the template did not exist.
	NoTemplate bool `json:"noTemplate,omitempty"`
	MaxBatch   int  `json:"maxBatch,omitempty"`
	// PolicyDenied is the policies' denial of the first plan's checks:
	// the case shows the plan made again knowing it.
	PolicyDenied string `json:"policyDenied,omitempty"`
	// NotProgressingReported: the pool was last reported not progressing.
	NotProgressingReported bool         `json:"notProgressingReported,omitempty"`
	Now                    *metav1.Time `json:"now,omitempty"`
}

func TestWarmPoolGolden(t *testing.T) {
	cases := golden.Cases(t, "warmpool")
	if len(cases) < 6 {
		t.Errorf("golden/warmpool has %d cases, want at least 6", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var pool extv1beta1.SandboxWarmPool
			readObject(t, c, "pool.yaml", &pool, false)
			tmpl := &extv1beta1.SandboxTemplate{}
			readObject(t, c, "template.yaml", tmpl, false)
			var obs warmPoolObserved
			if data, err := os.ReadFile(c.Path("observed.yaml")); err == nil {
				if err := yaml.UnmarshalStrict(data, &obs); err != nil {
					t.Fatalf("observed.yaml: %v", err)
				}
			}
			if obs.NoTemplate {
				tmpl = nil
			}
			taken := map[string]bool{}
			for _, n := range obs.Taken {
				taken[n] = true
			}
			observed := slices.Concat(obs.Members, obs.Claimed)
			for _, m := range observed {
				taken[m.Name] = true
				if m.ResourceVersion == "" {
					m.ResourceVersion = "1" // as the API server would
				}
			}
			held := map[types.UID]bool{}
			for _, m := range obs.Members {
				if slices.Contains(obs.Held, m.Name) {
					held[m.UID] = true
				}
			}
			now := goldenNow
			if obs.Now != nil {
				now = *obs.Now
			}
			in := WarmPoolPlanInputs{
				WarmPoolInputs: WarmPoolInputs{Pool: &pool, Template: tmpl},
				Members:        observed, Pending: obs.Pending,
				Taken: func(n string) bool { return taken[n] }, Suffix: SeededSuffixes(string(pool.UID)), MaxBatch: obs.MaxBatch,
				Policies: true, PolicyDenied: obs.PolicyDenied, NotProgressingReported: obs.NotProgressingReported,
				Grace: 5 * time.Minute, Now: now.Time, Held: held,
			}
			before := mustYAML(t, observed)
			plan, err := PlanWarmPool(in)
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			golden.AssertYAML(t, c.Path("plan.yaml"), plan)
			again, _ := PlanWarmPool(in)
			if a, b, after := mustYAML(t, plan), mustYAML(t, again), mustYAML(t, observed); a != b || before != after {
				t.Errorf("PlanWarmPool is not pure (outputs equal %v; inputs unchanged %v)", a == b, before == after)
			}

			var create []any
			var deleted []string
			for _, s := range plan.Steps {
				switch s.Action {
				case ActionCreate:
					create = append(create, s.Object)
				case ActionDelete:
					deleted = append(deleted, s.Name)
					if p := s.Preconditions; p == nil || p.UID == "" || p.ResourceVersion == "" {
						t.Errorf("delete of %s is not guarded by UID and resourceVersion: %+v", s.Name, p)
					}
				}
			}
			for _, m := range obs.Claimed {
				if slices.Contains(deleted, m.Name) {
					t.Errorf("the pool deletes %s, which a claim took", m.Name)
				}
			}
			for _, name := range obs.Held {
				if slices.Contains(deleted, name) {
					t.Errorf("the pool deletes %s, which a claim holds", name)
				}
			}
			// Claims refuse exactly the members the pool deletes: the
			// removals a claim computes (it knows nothing pending, so
			// only where nothing is pending) are the plan's deletes.
			if len(obs.Pending) == 0 {
				var refused []string
				for _, m := range WarmPoolRemovals(WarmPoolPlanInputs{
					WarmPoolInputs: WarmPoolInputs{Pool: &pool, Template: tmpl}, Members: observed,
				}) {
					if held[m.UID] {
						continue // the pool would have deleted it, and withdrew it
					}
					refused = append(refused, m.Name)
				}
				if !slices.Equal(refused, deleted) {
					t.Errorf("claims refuse %v, the pool deletes %v", refused, deleted)
				}
			}
			r := removals(in)
			golden.AssertYAML(t, c.Path("desired.yaml"), map[string]any{
				"create": create, "delete": deleted, "stale": r.stale, "hash": r.hash,
			})
			status := WarmPoolStatus(WarmPoolStatusInputs{
				Pool: &pool, Members: obs.Members, TemplateMissing: obs.NoTemplate, Grace: 5 * time.Minute, Now: now,
			})
			golden.AssertYAML(t, c.Path("status.yaml"), status.Status)
		})
	}
}
