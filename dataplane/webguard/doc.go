// Package webguard keeps web browsers from driving a data-plane server that
// listens on a developer's machine: the local router and the runtimes the
// local cluster's stand-in kubelet runs on 127.0.0.1. A page of any site the
// developer opens can make the browser send requests to 127.0.0.1, and
// through DNS rebinding (a name of the attacker's that first resolves to
// the attacker's server, then to 127.0.0.1) even read the answers. Two
// checks stop that:
//
//   - Hosts: the Host header must name this machine (localhost,
//     127.0.0.1, [::1], or a name the server was told to accept) or be an IP
//     address. A rebound page's requests carry the attacker's name as Host;
//     an IP address is sent as Host only by a browser that connected to that
//     very address, never through DNS, so Pod IPs (the Host the router's
//     port-forward transport sends) pass.
//   - CrossSite: a request a browser marks as coming from another site
//     (Sec-Fetch-Site: cross-site), or whose Origin is not the server's own
//     (scheme http or https and the request's Host), is refused. Programs
//     (the SDKs, curl, the router) send neither header.
//
// JSON says whether a request body is declared as JSON; a server that
// requires it for state-changing POSTs takes away the one body a page of
// another site can send without the browser asking first (a CORS
// preflight): text/plain, form-urlencoded and multipart.
//
// It is the standard library only (the runtime, which imports it, ships
// into sandbox images on its own) and it writes no answers: each server
// refuses in its own protocol's error shape. It must never be the only
// defence of a server reachable from a network: it stops browsers, not
// programs, which send whatever headers they like.
package webguard
