// Package eventgate keeps the controller's Events out of the way of its
// writes. An Event is best effort and read by people; the writes a claim or
// a Sandbox waits for (a member's take, a claim's status, a Pod) are not.
// On a small API server the two compete, so the Gate holds each Event while
// any of the controller's own writes is in flight or ended less than Quiet
// ago, or while the controller says it is busy (Gate.HoldWhile: claims it
// is serving, some with no write in flight yet), and sends it once the
// controller is quiet, or after MaxHold at the latest. One goroutine looks
// for the quiet on behalf of every held Event. The Event keeps the time it
// was recorded at: only its delivery waits.
//
// Gate.Track wraps the controller's transport (rest.Config.Wrap) to see its
// writes (POST, PUT, PATCH, DELETE to anything but Events); Gate.Sink wraps
// the events.EventSink a client-go events broadcaster writes through.
//
// SkipGoneNamespaces wraps such a sink too: an Event the API server refuses
// because its namespace is being deleted (or is gone) counts as sent and is
// logged at V(1), where the broadcaster would log an error for each.
package eventgate
