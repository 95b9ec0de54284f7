// Package image checks, without Docker, that the repository's Dockerfile
// builds: it reads the Dockerfile's build stage, lays out in a temporary
// directory exactly the files its COPY instructions take from the build
// context (minus what .dockerignore leaves out), and runs the stage's
// `go build` commands there, with the same flags and environment, against
// the local module and build caches (no network). A package the Dockerfile
// forgets to copy fails the test the way it would fail `docker build`.
//
// It also checks that the final stage copies what the build stage produced
// and that the builder image's Go is at least the one go.mod asks for.
//
// Only the Dockerfile syntax this repository uses is understood (FROM, ARG,
// ENV, WORKDIR, COPY, RUN in shell form); anything else in the build stage
// is an error, so the check never passes by skipping what it does not know.
// RUN commands other than `go build` (such as `go mod download`) are not
// run: they do not change what is compiled.
package image
