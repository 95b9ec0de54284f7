package tests

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"testing"
)

func TestParseHexAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:1F90":                         "127.0.0.1:8080",
		"00000000:0016":                         "0.0.0.0:22",
		"0101A8C0:0035":                         "192.168.1.1:53",
		"00000000000000000000000001000000:0050": "[::1]:80",
		"00000000000000000000000000000000:01BB": "[::]:443",
		"0000000000000000FFFF00000100007F:2382": "127.0.0.1:9090",
	} {
		got, err := parseHexAddr(in)
		if err != nil || got.String() != want {
			t.Errorf("parseHexAddr(%s) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"0100007F", "01007F:0050", "zz00007F:0050", "0100007F:10000"} {
		if _, err := parseHexAddr(bad); err == nil {
			t.Errorf("parseHexAddr(%s): no error", bad)
		}
	}
}

// Listening finds exactly this process's listening sockets, with the
// address each is bound to; connected and client sockets are not listed.
func TestListening(t *testing.T) {
	listen := func(network, addr string) netip.AddrPort {
		t.Helper()
		l, err := net.Listen(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return netip.MustParseAddrPort(l.Addr().String())
	}
	loop := listen("tcp4", "127.0.0.1:0")
	any4 := listen("tcp4", "0.0.0.0:0")
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = udp.Close() }()
	// A connection to loop: neither end is a listening socket.
	conn, err := net.Dial("tcp4", loop.String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()

	socks, err := Listening(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range socks {
		got = append(got, s.Proto+" "+s.Addr.String())
	}
	for _, want := range []string{"tcp " + loop.String(), "tcp " + any4.String(), "udp " + udp.LocalAddr().String()} {
		if !slices.Contains(got, want) {
			t.Errorf("Listening: %v lacks %s", got, want)
		}
	}
	if slices.Contains(got, "tcp "+conn.LocalAddr().String()) {
		t.Errorf("Listening lists the client end of a connection: %v", got)
	}
	bad := NotLoopback(socks)
	if len(bad) != 1 || bad[0].Addr != any4 {
		t.Errorf("NotLoopback = %v, want only %s", bad, any4)
	}
}

func TestChildren(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if got := Children(os.Getpid()); !slices.Contains(got, cmd.Process.Pid) {
		t.Fatalf("Children = %v, want %d among them", got, cmd.Process.Pid)
	}
}
