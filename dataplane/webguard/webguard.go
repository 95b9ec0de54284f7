package webguard

import (
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// LoopbackNames are the names of this machine every Hosts accepts.
var LoopbackNames = []string{"localhost", "127.0.0.1", "::1"}

// Hosts is the set of Host header values a server accepts (see the package
// documentation). The zero value and nil accept only loopback names and IP
// addresses.
type Hosts struct {
	names map[string]bool
}

// ParseHosts returns the Hosts that accept the loopback names, IP addresses
// and the given names (host names without scheme or port; "[::1]" and
// "::1" alike; case and a trailing dot do not matter).
func ParseHosts(names []string) (*Hosts, error) {
	h := &Hosts{names: map[string]bool{}}
	var errs []error
	for _, n := range append(append([]string{}, LoopbackNames...), names...) {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		host := normalize(n)
		if _, err := netip.ParseAddr(host); err != nil && !validName(host) {
			errs = append(errs, fmt.Errorf("allowed host %q: want a host name or an IP address, without scheme or port", n))
			continue
		}
		h.names[host] = true
	}
	return h, errors.Join(errs...)
}

// Allowed reports whether a request whose Host header is host may be
// served.
func (h *Hosts) Allowed(host string) bool {
	name := hostOnly(host)
	if name == "" {
		return false
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	if h == nil || h.names == nil {
		for _, n := range LoopbackNames {
			if n == name {
				return true
			}
		}
		return false
	}
	return h.names[name]
}

// Names lists the accepted names (IP addresses are accepted besides).
func (h *Hosts) Names() []string {
	if h == nil || h.names == nil {
		return append([]string{}, LoopbackNames...)
	}
	out := make([]string, 0, len(h.names))
	for n := range h.names {
		out = append(out, n)
	}
	return out
}

// hostOnly is a Host header's host, without port or brackets, lower-cased,
// without a trailing dot; "" when it is malformed.
func hostOnly(host string) string {
	if host == "" {
		return ""
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if strings.Count(host, ":") == 1 || strings.HasPrefix(host, "[") && !strings.HasSuffix(host, "]") {
		return "" // a port that does not parse, or a bracket left open
	}
	return normalize(host)
}

func normalize(host string) string {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// validName reports whether s is a DNS name (letters, digits, hyphens and
// dots; labels of 1 to 63 characters).
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
				return false
			}
		}
	}
	return true
}

// CrossSite returns why r comes from a page of another site, or "" when it
// does not: Sec-Fetch-Site is cross-site, or an Origin header is not the
// request's own origin (http or https, and exactly its Host).
func CrossSite(r *http.Request) string {
	if strings.EqualFold(strings.TrimSpace(r.Header.Get("Sec-Fetch-Site")), "cross-site") {
		return "a request from a page of another site (Sec-Fetch-Site: cross-site)"
	}
	for _, origin := range r.Header.Values("Origin") {
		if !sameOrigin(origin, r.Host) {
			return fmt.Sprintf("a request from a page of another origin (Origin %q)", origin)
		}
	}
	return ""
}

func sameOrigin(origin, host string) bool {
	u, err := url.Parse(strings.TrimSpace(origin))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return false // "null", file://, anything that is not scheme://host[:port]
	}
	return strings.EqualFold(u.Host, host)
}

// JSON reports whether r's body is declared as JSON: Content-Type
// application/json, or application/<anything>+json, parameters allowed.
func JSON(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return false
	}
	sub, ok := strings.CutPrefix(mt, "application/")
	return ok && (sub == "json" || strings.HasSuffix(sub, "+json"))
}
