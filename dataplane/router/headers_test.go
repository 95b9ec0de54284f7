package router

import (
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseTarget(t *testing.T) {
	limits := Limits{DefaultTimeout: 180 * time.Second, MaxTimeout: 10 * time.Minute}
	base := Target{ID: "box", Namespace: "default", Port: 8888, Timeout: 180 * time.Second}
	with := func(f func(*Target)) Target { t := base; f(&t); return t }
	for _, tc := range []struct {
		name    string
		headers map[string]string
		limits  *Limits
		want    Target
		err     string // the detail upstream answers with
	}{
		{name: "defaults", headers: map[string]string{"X-Sandbox-ID": "box"}, want: base},
		{name: "everything", headers: map[string]string{
			"X-Sandbox-ID": "box", "X-Sandbox-Namespace": "team-a", "X-Sandbox-Port": "9999",
			"X-Sandbox-UID": "5b1f7c6e-2f0b-4a53-a0c4-0d1f0a3c1e11", "X-Sandbox-Pod-IP": "10.20.30.40", "X-Sandbox-Timeout": "60",
		}, want: with(func(t *Target) {
			t.Namespace, t.Port, t.UID, t.PodIP, t.Timeout = "team-a", 9999, "5b1f7c6e-2f0b-4a53-a0c4-0d1f0a3c1e11", netip.MustParseAddr("10.20.30.40"), time.Minute
		})},
		{name: "missing id", headers: map[string]string{}, err: "X-Sandbox-ID header is required."},
		{name: "dotted id", headers: map[string]string{"X-Sandbox-ID": "bad.sandbox.id"}, err: "Invalid sandbox ID format."},
		{name: "upper-case id", headers: map[string]string{"X-Sandbox-ID": "Box"}, err: "Invalid sandbox ID format."},
		{name: "long id", headers: map[string]string{"X-Sandbox-ID": string(make([]byte, 64))}, err: "Invalid sandbox ID format."},
		{name: "bad namespace", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Namespace": "bad namespace!"}, err: "Invalid namespace format."},
		{name: "port not a number", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Port": "not-a-number"}, err: "Invalid port format."},
		{name: "port 0", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Port": "0"}, err: "Invalid port format."},
		{name: "port 65536", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Port": "65536"}, err: "Invalid port format."},
		{name: "port -80", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Port": "-80"}, err: "Invalid port format."},
		{name: "port 65535", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Port": "65535"}, want: with(func(t *Target) { t.Port = 65535 })},
		{name: "uid with a slash", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-UID": "a/b"}, err: "Invalid sandbox UID format."},
		{name: "ip not an ip", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Pod-IP": "not-an-ip"}, err: "Invalid target IP address format."},
		{name: "ip short", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Pod-IP": "10.20.30"}, err: "Invalid target IP address format."},
		{name: "ip with zone", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Pod-IP": "fe80::1%eth0"}, err: "Invalid target IP address format."},
		{name: "loopback", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Pod-IP": "127.0.0.1"}, err: "Invalid target IP address."},
		{name: "loopback v6", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Pod-IP": "::1"}, err: "Invalid target IP address."},
		{name: "metadata server", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Pod-IP": "169.254.169.254"}, err: "Invalid target IP address."},
		{name: "link-local v6", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Pod-IP": "fe80::1"}, err: "Invalid target IP address."},
		{name: "mapped loopback", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Pod-IP": "::ffff:127.0.0.1"}, err: "Invalid target IP address."},
		{name: "multicast", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Pod-IP": "224.0.0.1"}, err: "Invalid target IP address."},
		{name: "unspecified", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Pod-IP": "::"}, err: "Invalid target IP address."},
		{name: "loopback allowed", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Pod-IP": "127.0.0.1"},
			limits: &Limits{DefaultTimeout: 180 * time.Second, AllowLocalAddresses: true},
			want:   with(func(t *Target) { t.PodIP = netip.MustParseAddr("127.0.0.1") })},
		{name: "multicast never", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Pod-IP": "ff02::1"},
			limits: &Limits{DefaultTimeout: 180 * time.Second, AllowLocalAddresses: true}, err: "Invalid target IP address."},
		{name: "v6 normalised", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Pod-IP": "2001:0db8:0000:0000:0000:0000:0000:0001"},
			want: with(func(t *Target) { t.PodIP = netip.MustParseAddr("2001:db8::1") })},
		{name: "timeout fraction", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Timeout": "0.25"}, want: with(func(t *Target) { t.Timeout = 250 * time.Millisecond })},
		{name: "timeout invalid", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Timeout": "invalid"}, want: base},
		{name: "timeout inf", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Timeout": "inf"}, want: base},
		{name: "timeout nan", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Timeout": "NaN"}, want: base},
		{name: "timeout zero", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Timeout": "0"}, want: base},
		{name: "timeout negative", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Timeout": "-1"}, want: base},
		{name: "timeout capped", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Timeout": "1e300"}, want: with(func(t *Target) { t.Timeout = 10 * time.Minute })},
		{name: "timeout capped at the default without a maximum", headers: map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Timeout": "600"},
			limits: &Limits{DefaultTimeout: 180 * time.Second}, want: base},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			l := limits
			if tc.limits != nil {
				l = *tc.limits
			}
			got, err := ParseTarget(h, l)
			if tc.err != "" {
				if err == nil || err.Detail != tc.err || err.Status != http.StatusBadRequest {
					t.Fatalf("got %+v, %v; want 400 %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected refusal: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestAllowedAddress(t *testing.T) {
	for addr, want := range map[string][2]bool{ // without, with the local allowance
		"10.0.0.1": {true, true}, "2001:db8::1": {true, true}, "127.0.0.1": {false, true}, "::1": {false, true},
		"169.254.169.254": {false, false}, "169.254.1.1": {false, true}, "fd00:ec2::254": {false, false}, "100.100.100.200": {false, false}, "fe80::1": {false, true}, "0.0.0.0": {false, false}, "224.0.0.1": {false, false},
		"255.255.255.255": {false, false}, "::ffff:127.0.0.1": {false, true},
	} {
		a := netip.MustParseAddr(addr)
		if got := [2]bool{AllowedAddress(a, false), AllowedAddress(a, true)}; got != want {
			t.Errorf("AllowedAddress(%s) = %v, want %v", addr, got, want)
		}
	}
}
