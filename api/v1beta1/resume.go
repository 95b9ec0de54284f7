package v1beta1

import (
	"fmt"
	"strconv"
	"time"
)

// Resume on connect and idle suspend are opt-in, by annotation on a Sandbox
// (or on the SandboxTemplate or SandboxClaim that makes it, which copy them
// to the Sandbox). Upstream's manifests carry neither and are unaffected.
const (
	// AnnotationResumeOnConnect: "true" lets traffic (through the router or
	// the Go SDK) resume the Sandbox when it is Suspended.
	AnnotationResumeOnConnect = GroupName + "/resume-on-connect"
	// AnnotationIdleTimeout is a Go duration ("15m"): the controller
	// suspends the Sandbox after that long without traffic. It implies
	// resume on connect; "0" turns idle suspend off.
	AnnotationIdleTimeout = GroupName + "/idle-timeout"
	// AnnotationLastActivity is when traffic last reached the Sandbox
	// (RFC 3339), as the router and the SDK report it: at most one write
	// per Sandbox per report interval. While a request is in flight it is
	// a lease, a time ahead of the report (resume.InFlightLease), renewed
	// every interval: idle suspend counts its timeout from it.
	AnnotationLastActivity = GroupName + "/last-activity"
)

// Field managers of the writes resume and idle suspend make. Each owns its
// one field, so neither ever takes or drops a field of anyone else's.
const (
	// FieldManagerOperatingMode owns spec.operatingMode when it was set by
	// a resume on connect (router, SDK) or an idle suspend (controller).
	FieldManagerOperatingMode = "agent-sandbox-operating-mode"
	// FieldManagerActivity owns the last-activity annotation.
	FieldManagerActivity = "agent-sandbox-activity"
)

// MinIdleTimeout is the shortest idle timeout accepted.
const MinIdleTimeout = time.Second

// ResumePolicy is what a Sandbox's annotations ask for.
//
// +kubebuilder:object:generate=false
type ResumePolicy struct {
	// ResumeOnConnect: traffic resumes the Sandbox when it is Suspended.
	ResumeOnConnect bool
	// IdleTimeout, if positive, suspends the Sandbox after that long
	// without traffic.
	IdleTimeout time.Duration
}

// ResumePolicyOf reads the resume annotations. An invalid value is an
// error naming the annotation; the policy returned then holds what the
// valid annotations ask for, so a typo in one never switches the other off.
func ResumePolicyOf(annotations map[string]string) (ResumePolicy, error) {
	var p ResumePolicy
	var errs []error
	if v, ok := annotations[AnnotationResumeOnConnect]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("annotation %s: %q is not a boolean (use \"true\" or \"false\")", AnnotationResumeOnConnect, v))
		}
		p.ResumeOnConnect = b
	}
	if v, ok := annotations[AnnotationIdleTimeout]; ok {
		d, err := ParseIdleTimeout(v)
		if err != nil {
			errs = append(errs, err)
		}
		if d > 0 {
			p.IdleTimeout, p.ResumeOnConnect = d, true
		}
	}
	if len(errs) > 0 {
		return p, errs[0]
	}
	return p, nil
}

// ParseIdleTimeout parses an idle-timeout value: a Go duration of at least
// MinIdleTimeout, or "0" (off).
func ParseIdleTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return 0, fmt.Errorf("annotation %s: %q is not a duration (examples: \"30m\", \"1h30m\"; \"0\" turns idle suspend off)", AnnotationIdleTimeout, v)
	case d == 0:
		return 0, nil
	case d < MinIdleTimeout:
		return 0, fmt.Errorf("annotation %s: %q is shorter than %s", AnnotationIdleTimeout, v, MinIdleTimeout)
	}
	return d, nil
}

// ResumeAnnotations are the resume annotations of a template and a claim
// that the Sandbox they make carries: the claim's value of a key wins over
// the template's. Nil when neither sets any.
func ResumeAnnotations(template, claim map[string]string) map[string]string {
	var out map[string]string
	for _, src := range []map[string]string{template, claim} {
		for _, k := range []string{AnnotationResumeOnConnect, AnnotationIdleTimeout} {
			if v, ok := src[k]; ok {
				if out == nil {
					out = map[string]string{}
				}
				out[k] = v
			}
		}
	}
	return out
}

// OptInHint is how a user lets traffic resume a Sandbox, for messages.
const OptInHint = "annotate it " + AnnotationResumeOnConnect + "=true (or set " + AnnotationIdleTimeout +
	"), or resume it yourself: kubectl patch sandbox NAME --type merge -p '{\"spec\":{\"operatingMode\":\"Running\"}}'"
