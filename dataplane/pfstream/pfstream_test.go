package pfstream

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/streaming/pkg/httpstream"
)

// fakeConn is a port-forward connection whose stream creations answer only
// once `together` of them are in flight at the same time (as a server that
// answers nothing before it has seen both halves of a pair would), or fail
// for the stream types in fail.
type fakeConn struct {
	together int
	fail     map[string]bool

	mu       sync.Mutex
	inFlight int
	arrived  chan struct{}
	created  []*fakeStream
	removed  []httpstream.Stream
}

func newFakeConn(together int, fail ...string) *fakeConn {
	c := &fakeConn{together: together, fail: map[string]bool{}, arrived: make(chan struct{})}
	for _, f := range fail {
		c.fail[f] = true
	}
	return c
}

func (c *fakeConn) CreateStream(h http.Header) (httpstream.Stream, error) {
	c.mu.Lock()
	c.inFlight++
	if c.inFlight == c.together {
		close(c.arrived)
	}
	c.mu.Unlock()
	select {
	case <-c.arrived:
	case <-time.After(5 * time.Second):
		return nil, errors.New("timed out: the other stream of the pair was never asked for")
	}
	if c.fail[h.Get(corev1.StreamType)] {
		return nil, errors.New("refused")
	}
	s := &fakeStream{h: h.Clone()}
	c.mu.Lock()
	c.created = append(c.created, s)
	c.mu.Unlock()
	return s, nil
}

func (c *fakeConn) Close() error                 { return nil }
func (c *fakeConn) CloseChan() <-chan bool       { return make(chan bool) }
func (c *fakeConn) SetIdleTimeout(time.Duration) {}
func (c *fakeConn) RemoveStreams(s ...httpstream.Stream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removed = append(c.removed, s...)
}

type fakeStream struct {
	h             http.Header
	closed, reset bool
}

func (s *fakeStream) Read([]byte) (int, error)    { return 0, io.EOF }
func (s *fakeStream) Write(b []byte) (int, error) { return len(b), nil }
func (s *fakeStream) Close() error                { s.closed = true; return nil }
func (s *fakeStream) Reset() error                { s.reset = true; return nil }
func (s *fakeStream) Headers() http.Header        { return s.h }
func (s *fakeStream) Identifier() uint32          { return 0 }

// Both streams are asked for before either answer is awaited (the fake
// answers neither until both are in flight), with the pair's headers; the
// error stream is closed for writing, the data stream left open.
func TestOpenAsksForBothStreamsAtOnce(t *testing.T) {
	c := newFakeConn(2)
	data, errs, err := Open(c, 8888, 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s    httpstream.Stream
		kind string
	}{{data, corev1.StreamTypeData}, {errs, corev1.StreamTypeError}} {
		h := tc.s.Headers()
		if h.Get(corev1.StreamType) != tc.kind || h.Get(corev1.PortHeader) != "8888" || h.Get(corev1.PortForwardRequestIDHeader) != "7" {
			t.Errorf("%s stream headers %v", tc.kind, h)
		}
	}
	if !errs.(*fakeStream).closed || data.(*fakeStream).closed {
		t.Errorf("error stream closed %v, data stream closed %v: want only the error stream closed",
			errs.(*fakeStream).closed, data.(*fakeStream).closed)
	}
}

// When one half of the pair is refused, the other is reset and removed,
// and nothing is returned.
func TestOpenResetsTheOtherHalf(t *testing.T) {
	for _, failing := range []string{corev1.StreamTypeData, corev1.StreamTypeError} {
		c := newFakeConn(2, failing)
		data, errs, err := Open(c, 8888, 1)
		if err == nil || data != nil || errs != nil {
			t.Fatalf("%s refused: got %v, %v, %v; want only an error", failing, data, errs, err)
		}
		if len(c.created) != 1 || !c.created[0].reset || len(c.removed) != 1 {
			t.Errorf("%s refused: created %d, the other reset %v, removed %d; want the other reset and removed",
				failing, len(c.created), len(c.created) == 1 && c.created[0].reset, len(c.removed))
		}
	}
}
