package router

import (
	"fmt"
	"net/http"

	"github.com/agentsandbox/reconciler/dataplane/webguard"
)

// LocalGuard wraps the proxy of a router that listens on a developer's
// machine (the local cluster's, on 127.0.0.1): a request whose Host is
// neither one of hosts' names nor an IP address (what DNS rebinding
// sends), and a request from a page of another site (a foreign Origin,
// Sec-Fetch-Site: cross-site), are refused 403 in the router's
// {"detail": ...} shape before anything is resolved or proxied. A router
// in a cluster is reached by Service names and Gateways, so it runs
// without it unless told otherwise (--allowed-hosts).
func LocalGuard(next http.Handler, hosts *webguard.Hosts, m *Metrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e *Error
		if !hosts.Allowed(r.Host) {
			e = &Error{Status: http.StatusForbidden, Reason: ReasonForbidden,
				Detail: fmt.Sprintf("Host %q is not allowed: this router answers only requests addressed to this machine (localhost, 127.0.0.1, [::1]) or an IP address.", r.Host)}
		} else if why := webguard.CrossSite(r); why != "" {
			e = &Error{Status: http.StatusForbidden, Reason: ReasonForbidden, Detail: "Refused " + why + "."}
		}
		if e != nil {
			m.refused(e)
			WriteError(w, e)
			return
		}
		next.ServeHTTP(w, r)
	})
}
