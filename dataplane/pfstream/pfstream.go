package pfstream

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/streaming/pkg/httpstream"
)

// Open creates on conn the error and the data stream of one TCP connection
// to port, numbered requestID, and closes the error stream for writing
// (nothing is sent on it; the kubelet writes there why the connection
// failed). Both creations are sent before either answer is awaited: the
// kubelet (and kwok, which shares its code) pairs the two streams by
// request ID in whichever order they come, so a connection costs one round
// trip through the API server rather than two. If either creation fails,
// the other stream is reset and nothing is returned.
func Open(conn httpstream.Connection, port int, requestID int64) (data, errs httpstream.Stream, err error) {
	header := func(kind string) http.Header {
		h := http.Header{}
		h.Set(corev1.StreamType, kind)
		h.Set(corev1.PortHeader, strconv.Itoa(port))
		h.Set(corev1.PortForwardRequestIDHeader, strconv.FormatInt(requestID, 10))
		return h
	}
	type created struct {
		s   httpstream.Stream
		err error
	}
	errCh := make(chan created, 1)
	go func() {
		s, err := conn.CreateStream(header(corev1.StreamTypeError))
		errCh <- created{s, err}
	}()
	data, dataErr := conn.CreateStream(header(corev1.StreamTypeData))
	e := <-errCh
	if dataErr == nil && e.err == nil {
		_ = e.s.Close()
		return data, e.s, nil
	}
	for _, s := range []httpstream.Stream{data, e.s} {
		if s != nil {
			_ = s.Reset()
			conn.RemoveStreams(s)
		}
	}
	if e.err != nil {
		e.err = fmt.Errorf("error stream: %w", e.err)
	}
	if dataErr != nil {
		dataErr = fmt.Errorf("data stream: %w", dataErr)
	}
	return nil, nil, errors.Join(e.err, dataErr)
}
