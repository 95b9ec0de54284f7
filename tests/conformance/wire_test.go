package conformance

import (
	"fmt"
	"strconv"
	"sync/atomic"
)

// The request shapes of upstream's SDKs, as they reach the wire.

// requestSeq numbers the X-Request-ID of replayed requests.
var requestSeq atomic.Int64

// goSDKHeaders are the header lines upstream's Go SDK (net/http) writes
// after Host for a request to the router: User-Agent, Content-Length when
// there is a body, then the headers in net/http's sorted order
// (canonicalized names: X-Sandbox-Id, X-Request-Id), then
// Accept-Encoding. id is the Sandbox's name; timeout, when not "", is
// X-Sandbox-Timeout (float seconds, as strconv.FormatFloat 'f' -1 writes
// it).
func goSDKHeaders(id, ns, contentType string, body []byte, timeout string) []string {
	h := []string{"User-Agent: Go-http-client/1.1"}
	if body != nil {
		h = append(h, "Content-Length: "+strconv.Itoa(len(body)))
	}
	if contentType != "" {
		h = append(h, "Content-Type: "+contentType)
	}
	h = append(h, fmt.Sprintf("X-Request-Id: %016x", requestSeq.Add(1)))
	if id != "" {
		h = append(h, "X-Sandbox-Id: "+id, "X-Sandbox-Namespace: "+ns, "X-Sandbox-Port: 8888")
		if timeout != "" {
			h = append(h, "X-Sandbox-Timeout: "+timeout)
		}
	}
	return append(h, "Accept-Encoding: gzip")
}

// goSDKTunnelHeaders are the Go SDK's header lines over the sandboxd pod
// tunnel: no router headers, only X-Request-Id (and Content-Type).
func goSDKTunnelHeaders(contentType string, body []byte) []string {
	h := []string{"User-Agent: Go-http-client/1.1"}
	if body != nil {
		h = append(h, "Content-Length: "+strconv.Itoa(len(body)))
	}
	if contentType != "" {
		h = append(h, "Content-Type: "+contentType)
	}
	return append(h, fmt.Sprintf("X-Request-Id: %016x", requestSeq.Add(1)), "Accept-Encoding: gzip")
}

// pythonSDKHeaders are the header lines of upstream's Python SDK (requests
// with a session carrying the router headers, spelled as the SDK spells
// them), with a W3C traceparent as it sends with tracing on.
func pythonSDKHeaders(id, ns, contentType string, body []byte) []string {
	h := []string{"User-Agent: python-requests/2.32.3", "Accept-Encoding: gzip, deflate", "Accept: */*", "Connection: keep-alive"}
	if id != "" {
		h = append(h, "X-Sandbox-ID: "+id, "X-Sandbox-Namespace: "+ns, "X-Sandbox-Port: 8888")
	}
	h = append(h, fmt.Sprintf("X-Request-ID: py-%d", requestSeq.Add(1)),
		"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if body != nil {
		h = append(h, "Content-Length: "+strconv.Itoa(len(body)))
	}
	if contentType != "" {
		h = append(h, "Content-Type: "+contentType)
	}
	return h
}

// goMultipart is the body upstream's Go SDK writes for Write (legacy):
// mime/multipart's CreateFormFile("file", name), which adds the part's
// Content-Type application/octet-stream. boundary is fixed here (the SDK's
// is random) so the bytes are known.
func goMultipart(boundary, name string, content []byte) []byte {
	return []byte(fmt.Sprintf("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\n"+
		"Content-Type: application/octet-stream\r\n\r\n%s\r\n--%s--\r\n", boundary, name, content, boundary))
}

// pythonMultipart is the body of the Python SDK's upload (requests'
// files={"file": (name, content)}): no part Content-Type.
func pythonMultipart(boundary, name string, content []byte) []byte {
	return []byte(fmt.Sprintf("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\n\r\n%s\r\n--%s--\r\n",
		boundary, name, content, boundary))
}
