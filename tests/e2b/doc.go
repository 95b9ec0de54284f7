// Package e2b runs the unmodified e2b SDK from npm against the E2B front
// door of a local cluster. The directory holds a Node project that pins
// `e2b` (package.json, package-lock.json) and its scripts: sdk.mjs, the
// end-to-end check of every SDK call we serve (one JSON line per step), and
// bench.mjs, the figures `make bench` reads. This package finds node and npm
// (Available), installs the locked dependencies once per lockfile with
// `npm ci` into .work/e2b-node/<hash of the lockfile>/ (Install) and runs a
// script there with only the E2B environment variables it is given (Run).
// The tests that run the SDK live in tests/e2e and tests/bench; this
// package's own tests check that docs/sdks.md's example is hello.mjs, that
// package.json pins Version, and that the router reports the envd version
// the runtime serves.
package e2b
