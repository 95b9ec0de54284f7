// Package resume is the data plane's half of resume on connect and idle
// suspend, shared by the sandbox router and the Go SDK: the two writes they
// make to a Sandbox (spec.operatingMode set to Running, and the
// last-activity annotation), one resume shared by all the requests that
// wait for it, and an activity reporter that turns any number of requests
// into at most one write per Sandbox per interval, made off the request
// path (while a request is in flight, the time written is a lease ahead of
// the report, so idle suspend never takes the Pod from under it).
//
// Both writes are server-side apply under their own field manager
// (agents.x-k8s.io/v1beta1's FieldManagerOperatingMode and
// FieldManagerActivity), each owning one field and nothing else, with the
// Sandbox's UID as a precondition so that a Sandbox deleted and made again
// under the same name is never written on the old one's behalf. Whether a
// Sandbox opted in is read from its annotations (v1beta1.ResumePolicyOf);
// this package never decides to suspend (the controller does) and never
// imports the controller's packages.
package resume
