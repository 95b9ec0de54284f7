// Package runtimeclass tests the default runtime class against a real API
// server (envtest): a controller run with --default-runtime-class=auto
// gives the Pods of Sandboxes and templates that name no class the first
// isolating RuntimeClass the cluster has, follows RuntimeClasses as they
// are installed and removed, and never writes the class into a Sandbox or
// changes a running Pod.
package runtimeclass
