package bench

import (
	"sort"
	"time"
)

// ClaimTimeline is where the time between sending a claim's create and
// the bench's watch seeing it Ready goes, each stage's p50 and p99 over
// the claims of one run, in ms. The stages follow one another: the create
// reaches the controller (its controller-first-observed-at annotation, the
// same host's clock), the controller takes a member (the watch sees a
// Sandbox the claim controls), records the binding (the watch sees the
// claim's sandbox-name annotation) and reports it Ready. A stage a claim
// did not pass through in that order (the watch saw two writes in one
// event) counts as 0.
type ClaimTimeline struct {
	ToObserved      Quantiles `json:"sent_to_controller_observed_ms"`
	ObservedToTaken Quantiles `json:"observed_to_member_taken_ms"`
	TakenToRecorded Quantiles `json:"member_taken_to_annotated_ms"`
	RecordedToReady Quantiles `json:"annotated_to_ready_ms"`
	// CreateRequest is the claim's create request, from sending it to its
	// answer: part of the first stage (the watch can see the claim, and
	// the controller take it, before the answer is back).
	CreateRequest Quantiles `json:"create_request_ms"`
	// Claims counts the claims the timeline is made of: those whose
	// every stage was seen.
	Claims int `json:"claims"`
	// Slowest are the slowest claims (sent to Ready), slowest first, with
	// their stages: where a p99 went, and when (to set beside the
	// controller's log and the API server's profile).
	Slowest []SlowClaim `json:"slowest,omitempty"`
	// Refill is how the claims met the pool's refill.
	Refill RefillOverlap `json:"refill"`
	// Events is how the claims met other claims' SandboxAdopted Events.
	Events EventOverlap `json:"events"`
	// GC is how the claims met the controller's garbage collections (the
	// controller's claims only).
	GC *GCOverlap `json:"controller_gc,omitempty"`
	// APIServerGC is how the claims met the API server's collections
	// (apiServerGCLog), on either side.
	APIServerGC *GCOverlap `json:"apiserver_gc,omitempty"`
}

// SlowClaim is one claim of a timeline: when its create was sent (this
// host's clock), its stages in the order of ClaimTimeline, and in all.
type SlowClaim struct {
	Name     string     `json:"name"`
	SentAt   time.Time  `json:"sent_at"`
	StagesMs [4]float64 `json:"stages_ms"`
	// CreateMs is its create request's duration (within the first stage).
	CreateMs float64 `json:"create_request_ms"`
	TotalMs  float64 `json:"total_ms"`
	// Refills counts the pool members on their way to Ready while it was
	// served.
	Refills int `json:"refills_in_flight"`
	// GCMs is how much of its time the controller was collecting
	// garbage (the controller's claims only).
	GCMs float64 `json:"controller_gc_ms,omitempty"`
	// APIServerGCMs is how much of its time the API server was
	// collecting garbage.
	APIServerGCMs float64 `json:"apiserver_gc_ms,omitempty"`
}

// slowestClaims is how many claims a timeline names.
const slowestClaims = 3

// Quantiles are the p50 and p99 of one stage.
type Quantiles struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

// timeline is the claims named <prefix>-<i>'s ClaimTimeline.
func (k *claimClock) timeline(prefix string, n int) ClaimTimeline {
	return k.timelineOf(k.names(prefix, n))
}

// timelineOf is the ClaimTimeline of the claims named.
func (k *claimClock) timelineOf(names []string) ClaimTimeline {
	k.mu.Lock()
	defer k.mu.Unlock()
	var stages [4][]float64
	var creates []float64
	var tl ClaimTimeline
	var gc, apiGC []gcWindow
	if k.gc != nil {
		gc = k.gc()
	}
	if k.apiGC != nil {
		apiGC = k.apiGC()
	}
	for _, name := range names {
		at := []time.Time{k.sent[name], k.observedAt[name], k.adoptedAt[name], k.annotatedAt[name], k.readyAt[name]}
		complete := true
		for _, t := range at {
			complete = complete && !t.IsZero()
		}
		if !complete {
			continue
		}
		tl.Claims++
		slow := SlowClaim{Name: name, SentAt: at[0], TotalMs: ms(at[4].Sub(at[0])), CreateMs: ms(k.created[name]),
			Refills: k.refillsDuring(at[0], at[4]), GCMs: gcMs(gc, at[0], at[4]), APIServerGCMs: gcMs(apiGC, at[0], at[4])}
		creates = append(creates, slow.CreateMs)
		for i := range stages {
			slow.StagesMs[i] = max(0, ms(at[i+1].Sub(at[i])))
			stages[i] = append(stages[i], slow.StagesMs[i])
		}
		tl.Slowest = append(tl.Slowest, slow)
	}
	sort.Slice(tl.Slowest, func(i, j int) bool { return tl.Slowest[i].TotalMs > tl.Slowest[j].TotalMs })
	tl.Slowest = tl.Slowest[:min(len(tl.Slowest), slowestClaims)]
	q := quantilesOf
	tl.ToObserved, tl.ObservedToTaken, tl.TakenToRecorded, tl.RecordedToReady = q(stages[0]), q(stages[1]), q(stages[2]), q(stages[3])
	tl.CreateRequest = q(creates)
	tl.Refill = k.refillOverlap(names)
	tl.Events = k.eventOverlap(names)
	tl.GC, tl.APIServerGC = k.gcOverlap(names, k.gc, gc), k.gcOverlap(names, k.apiGC, apiGC)
	return tl
}

// quantilesOf is the p50 and p99 of v (which it sorts).
func quantilesOf(v []float64) Quantiles {
	sort.Float64s(v)
	return Quantiles{P50: quantile(v, 0.5), P99: quantile(v, 0.99)}
}
