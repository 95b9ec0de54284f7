// Package bench measures the controller on a local cluster and prints one
// JSON document: a raw lower bound (Pods and Services created directly), cold
// create, a metadata-only touch, suspend, resume and delete of N Sandboxes,
// with the controller's API requests by verb. It runs only under `make bench`;
// figures are reported, never asserted.
package bench
