package bench

import "testing"

// writes counts the requests of byVerb (rest_client_requests_total's
// methods, as requestsByVerb gives them) that write: all but GET, LIST
// and WATCH.
func writes(byVerb map[string]int64) int64 {
	var n int64
	for verb, v := range byVerb {
		switch verb {
		case "GET", "LIST", "WATCH":
		default:
			n += v
		}
	}
	return n
}

func TestWritesLeaveReadsOut(t *testing.T) {
	for _, c := range []struct {
		byVerb map[string]int64
		want   int64
	}{
		{nil, 0},
		{map[string]int64{"GET": 3, "WATCH": 38, "LIST": 2}, 0},
		// suspend at N=5000 on 2026-12-01: 15,010 requests, 15,000 writes.
		{map[string]int64{"DELETE": 5000, "PATCH": 10000, "WATCH": 10}, 15000},
		{map[string]int64{"POST": 1, "PUT": 2, "PATCH": 3, "DELETE": 4, "GET": 100}, 10},
	} {
		if got := writes(c.byVerb); got != c.want {
			t.Errorf("writes(%v) = %d, want %d", c.byVerb, got, c.want)
		}
	}
}
