package router

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// recordingDialer is a podDialer that records the UIDs it was asked to dial
// and reaches nothing.
type recordingDialer struct{ dialled []types.UID }

func (r *recordingDialer) Remember(types.UID, string, string) {}

func (r *recordingDialer) DialPod(_ context.Context, uid types.UID, _ int) (net.Conn, error) {
	r.dialled = append(r.dialled, uid)
	return nil, errors.New("recordingDialer reaches nothing")
}

// TestUnresolvedEndpointIsNeverDialled: an endpoint with neither an
// address nor a Pod UID is refused before any dial, whichever transport
// the router has; its host is never taken for a Pod's UID.
func TestUnresolvedEndpointIsNeverDialled(t *testing.T) {
	for _, pods := range []podDialer{nil, &recordingDialer{}} {
		tr := NewTransport(nil)
		tr.pods = pods
		host, _ := tr.Address(Endpoint{Port: 8888})
		req, err := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTripper().RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		if !errors.Is(err, errNoForward) {
			t.Errorf("pods %T: RoundTrip to %s = %v; want errNoForward", pods, host, err)
		}
		if r, ok := pods.(*recordingDialer); ok && len(r.dialled) != 0 {
			t.Errorf("the Pod dialer was asked for UIDs %v", r.dialled)
		}
	}
}
