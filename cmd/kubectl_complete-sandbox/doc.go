// Command kubectl_complete-sandbox is kubectl's completion hook for the
// sandbox plugin: for "kubectl sandbox <TAB>", kubectl (1.26 and later) runs
// kubectl_complete-sandbox __complete ARGS... and shows what it prints. It
// runs the kubectl-sandbox next to it (else the one on PATH) with the same
// arguments, so completion comes from the plugin's own command tree. It is
// wiring only.
package main
