// Package lostanswer tests what the claim controller does when the API
// server makes a write and its answer never arrives (the API server went
// away mid-request), against a real API server (envtest): a transport
// between the controller and the API server loses chosen answers and
// holds back the controller's watch, as a busy or restarting API server
// would. The rule under test: a write whose outcome is unknown is read
// back before anything is decided on it.
package lostanswer
