package bench

import (
	"fmt"
	"testing"
)

// BurstRounds is claim -> first command through the router, all at once,
// over several rounds (BENCH_DP_BURSTS, 3): each round the plain client's
// burst (the floor's claim Ready), then the SDK's through the router, then
// the SDK's waiting for its claims' Ready by watch (router_watch), each on
// a full pool. One burst's ratio moves with the floor's own burst,
// which on this machine was 684 ms at p50 in one run and 1380 ms in
// another with the same build, so the median of the rounds' ratios is the
// figure to read.
type BurstRounds struct {
	Rounds int `json:"rounds"`
	// Keys are the rounds' keys in ClaimReady and FirstCommand ("burst",
	// "burst2", ...; the SDK's is <key>_router).
	Keys []string `json:"keys"`
	// P50Ratios and P99Ratios are each round's ratios to its own first
	// command floor (its floor burst plus one command alone).
	P50Ratios []float64 `json:"p50_ratios_to_first_command_floor"`
	P99Ratios []float64 `json:"p99_ratios_to_first_command_floor"`
	MedianP50 float64   `json:"median_p50_ratio_to_first_command_floor"`
	MedianP99 float64   `json:"median_p99_ratio_to_first_command_floor"`
	// Watch is the same for <key>_router_watch: the SDK waiting for its
	// claims' Ready by watch, through the same router, in the same rounds.
	Watch *BurstRounds `json:"router_watch,omitempty"`
}

// burstRounds runs the bursts after the first (BENCH_DP_BURSTS in all,
// the floor's and then the router's each time) with phase, and returns
// the keys of every round, the first included.
func burstRounds(t *testing.T, phase func(key string, floor bool)) []string {
	keys := []string{"burst"}
	for i := 2; i <= envInt(t, "BENCH_DP_BURSTS", 3); i++ {
		key := fmt.Sprintf("burst%d", i)
		phase(key, true)
		phase(key+"_router", false)
		phase(key+"_router_watch", false)
		keys = append(keys, key)
	}
	return keys
}

// summarizeBursts reads the rounds' ratios from res (FirstCommand with
// its ratios to the first command floor filled in).
func summarizeBursts(res *Dataplane, keys []string) *BurstRounds {
	b := summarizeWay(res, keys, "_router")
	b.Watch = summarizeWay(res, keys, "_router_watch")
	return b
}

func summarizeWay(res *Dataplane, keys []string, way string) *BurstRounds {
	b := &BurstRounds{Rounds: len(keys), Keys: keys}
	for _, k := range keys {
		l, ok := res.FirstCommand[k+way]
		if !ok {
			continue
		}
		b.P50Ratios = append(b.P50Ratios, l.RatioP50ToFirstCommandFloor)
		b.P99Ratios = append(b.P99Ratios, l.RatioP99ToFirstCommandFloor)
	}
	b.MedianP50, b.MedianP99 = round2(median(b.P50Ratios)), round2(median(b.P99Ratios))
	return b
}
