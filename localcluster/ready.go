package localcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// poll calls check every 200 ms until it returns nil or timeout passes;
// then it returns check's last error with the context's.
func poll(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitDefaultServiceAccount waits until the controller manager has made
// the "default" namespace's ServiceAccount: until then the API server
// refuses every Pod there (the ServiceAccount admission plugin), and on a
// loaded machine the controller manager can take a while to get to it.
func (c *Cluster) waitDefaultServiceAccount(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	err = poll(ctx, 4*time.Minute, func(ctx context.Context) error {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("waiting for the ServiceAccount default/default (kube-controller-manager's log ends: %s): %w",
			c.logTail("kube-controller-manager", 8), err)
	}
	return nil
}
