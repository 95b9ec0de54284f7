package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sdk "github.com/agentsandbox/reconciler/dataplane/client"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/monitoring"
)

// checkDashboardMetrics checks that every metric a panel of the Grafana
// dashboard or an alert of config/monitoring uses is served on the real
// controller's or router's /metrics (what `make run` runs), after the
// events that make the event-driven ones appear: a Sandbox the webhook
// refuses (a privileged container, against the baseline bundle) and a
// request through the router for a Sandbox that does not exist.
func checkDashboardMetrics(t *testing.T, c client.Client, metricsURL, routerMetricsURL, routerURL string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	privileged := tests.Sandbox("default", "privileged-probe", func(sb *sandboxv1beta1.Sandbox) {
		sb.Spec.PodTemplate.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	})
	switch err := c.Create(ctx, privileged); {
	case err == nil:
		_ = c.Delete(ctx, privileged)
		t.Fatal("the webhook admitted a privileged Sandbox")
	case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) && !strings.Contains(err.Error(), "privileged"):
		t.Fatalf("creating a privileged Sandbox: %v (want a denial)", err)
	}
	if rsb, err := sdk.Dial(ctx, "default", "no-such-sandbox", sdk.WithRouter(routerURL)); err == nil {
		if _, err := rsb.Run(ctx, "true"); err == nil {
			t.Fatal("the router ran a command in a Sandbox that does not exist")
		}
		_ = rsb.Close(ctx)
	}

	uses, err := monitoring.Uses()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "every metric of the dashboard and the alerts served", func() error {
		families := map[string]bool{}
		for _, url := range []string{metricsURL, routerMetricsURL} {
			series, err := tests.ScrapeMetrics(url)
			if err != nil {
				return err
			}
			for f := range monitoring.Families(series) {
				families[f] = true
			}
		}
		missing, err := monitoring.Missing(uses, families)
		if err != nil {
			return err
		}
		if len(missing) == 0 {
			return nil
		}
		var lines []string
		for where, names := range missing {
			lines = append(lines, fmt.Sprintf("%s: %s", where, strings.Join(names, ", ")))
		}
		sort.Strings(lines)
		return errors.New("not served: " + strings.Join(lines, "; "))
	})
}
