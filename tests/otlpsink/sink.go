package otlpsink

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// maxBody bounds one export request.
const maxBody = 16 << 20

// Span is a received span with the service that sent it.
type Span struct {
	*tracepb.Span
	Service string
}

// TraceID, SpanID and ParentID are the span's IDs in hex.
func (s Span) TraceID() string  { return hex.EncodeToString(s.GetTraceId()) }
func (s Span) SpanID() string   { return hex.EncodeToString(s.GetSpanId()) }
func (s Span) ParentID() string { return hex.EncodeToString(s.GetParentSpanId()) }

// Sink is the receiver: an http.Handler for POST /v1/traces.
type Sink struct {
	mu       sync.Mutex
	spans    []Span
	requests int
	last     time.Time
}

func (k *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.Error(w, "only POST /v1/traces (OTLP/HTTP protobuf) is served", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, "not an ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	k.mu.Lock()
	k.requests++
	k.last = time.Now()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				k.spans = append(k.spans, Span{Span: s, Service: service})
			}
		}
	}
	k.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Spans returns the spans received so far, and how many export requests
// brought them.
func (k *Sink) Spans() (spans []Span, requests int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Span(nil), k.spans...), k.requests
}

// Take removes and returns the spans of the traces no span arrived for
// within quiet (all of them when quiet is zero).
func (k *Sink) Take(quiet time.Duration) []Span {
	k.mu.Lock()
	defer k.mu.Unlock()
	if quiet > 0 && time.Since(k.last) < quiet {
		return nil
	}
	out := k.spans
	k.spans = nil
	return out
}

// Tree renders the spans of each trace as an indented tree, children in
// start order, each line "name [service] duration".
func Tree(spans []Span) string {
	byTrace := map[string][]Span{}
	var traces []string
	for _, s := range spans {
		if byTrace[s.TraceID()] == nil {
			traces = append(traces, s.TraceID())
		}
		byTrace[s.TraceID()] = append(byTrace[s.TraceID()], s)
	}
	var b strings.Builder
	for _, id := range traces {
		ts := byTrace[id]
		sort.Slice(ts, func(i, j int) bool { return ts[i].GetStartTimeUnixNano() < ts[j].GetStartTimeUnixNano() })
		known := map[string]bool{}
		children := map[string][]Span{}
		for _, s := range ts {
			known[s.SpanID()] = true
		}
		var roots []Span
		for _, s := range ts {
			if p := s.ParentID(); p != "" && known[p] {
				children[p] = append(children[p], s)
			} else {
				roots = append(roots, s)
			}
		}
		fmt.Fprintf(&b, "trace %s\n", id)
		var walk func(s Span, depth int)
		walk = func(s Span, depth int) {
			d := time.Duration(s.GetEndTimeUnixNano() - s.GetStartTimeUnixNano())
			fmt.Fprintf(&b, "%s%s [%s] %s\n", strings.Repeat("  ", depth+1), s.GetName(), s.Service, d.Round(10*time.Microsecond))
			for _, c := range children[s.SpanID()] {
				walk(c, depth+1)
			}
		}
		for _, r := range roots {
			walk(r, 0)
		}
	}
	return b.String()
}
