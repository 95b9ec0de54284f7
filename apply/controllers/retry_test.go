package controllers

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentsandbox/reconciler/apply/metrics"
)

func TestRetriesQuiet(t *testing.T) {
	gr := schema.GroupResource{Group: "agents.x-k8s.io", Resource: "sandboxes"}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}}
	cases := []struct {
		name   string
		err    error
		reason string // "" = returned to controller-runtime
	}{
		{"conflict", apierrors.NewConflict(gr, "a", errors.New("the object has been modified")), "conflict"},
		{"wrapped conflict", fmt.Errorf("writing status: %w", apierrors.NewConflict(gr, "a", errors.New("modified"))), "conflict"},
		{"already exists", apierrors.NewAlreadyExists(gr, "a"), "already_exists"},
		{"connection refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), "unavailable"},
		{"service unavailable", apierrors.NewServiceUnavailable("etcd is away"), "unavailable"},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "a", nil), ""},
		{"forbidden", apierrors.NewForbidden(gr, "a", errors.New("no")), ""},
		{"service account not there yet", fmt.Errorf("applying Pod: %w", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "a",
			errors.New(`error looking up service account ns/default: serviceaccount "default" not found`))), "service_account"},
		{"plain", errors.New("boom"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r retries
			before := 0.0
			if tc.reason != "" {
				before = retried(t, tc.reason)
			}
			res, err := r.quiet(context.Background(), "test", req, reconcile.Result{}, tc.err)
			if tc.reason == "" {
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v not returned (got %v)", tc.err, err)
				}
				return
			}
			if err != nil || res.RequeueAfter <= 0 {
				t.Fatalf("expected a silent retry, got %+v, %v", res, err)
			}
			if got := retried(t, tc.reason); got != before+1 {
				t.Fatalf("retries{reason=%s} = %v, want %v", tc.reason, got, before+1)
			}
			// The backoff grows per request and resets on success.
			res2, _ := r.quiet(context.Background(), "test", req, reconcile.Result{}, tc.err)
			if res2.RequeueAfter <= res.RequeueAfter {
				t.Fatalf("second retry after %s, first after %s: no backoff", res2.RequeueAfter, res.RequeueAfter)
			}
			if _, err := r.quiet(context.Background(), "test", req, reconcile.Result{}, nil); err != nil {
				t.Fatal(err)
			}
			res3, _ := r.quiet(context.Background(), "test", req, reconcile.Result{}, tc.err)
			if res3.RequeueAfter != res.RequeueAfter {
				t.Fatalf("after a success the retry waits %s, want the base %s again", res3.RequeueAfter, res.RequeueAfter)
			}
		})
	}
	// Cut short by shutdown: nothing to retry, nothing to log.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var r retries
	if res, err := r.quiet(ctx, "test", req, reconcile.Result{}, errors.New("context canceled")); err != nil || res.RequeueAfter != 0 {
		t.Fatalf("after shutdown: %+v, %v", res, err)
	}
}

func retried(t *testing.T, reason string) float64 {
	t.Helper()
	var m dto.Metric
	if err := metrics.ReconcileRetries.WithLabelValues("test", reason).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
