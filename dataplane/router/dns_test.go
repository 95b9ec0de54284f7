package router

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsServer is a small authoritative DNS server on 127.0.0.1 (UDP) that
// answers A and AAAA queries from a table, NXDOMAIN for other names, and
// counts the queries it got per name.
type dnsServer struct {
	conn    net.PacketConn
	mu      sync.Mutex
	records map[string][]netip.Addr
	queries map[string]*atomic.Int64
}

func startDNS(t *testing.T, records map[string][]netip.Addr) *dnsServer {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsServer{conn: conn, records: map[string][]netip.Addr{}, queries: map[string]*atomic.Int64{}}
	for name, addrs := range records {
		s.records[strings.TrimSuffix(name, ".")+"."] = addrs
	}
	go s.serve()
	t.Cleanup(func() { _ = conn.Close() })
	return s
}

// Resolver is a Go resolver that asks only this server.
func (s *dnsServer) Resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", s.conn.LocalAddr().String())
	}}
}

// Queries is how many questions the server got about name.
func (s *dnsServer) Queries(name string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.queries[strings.TrimSuffix(name, ".")+"."]; c != nil {
		return c.Load()
	}
	return 0
}

func (s *dnsServer) serve() {
	buf := make([]byte, 1500)
	for {
		n, addr, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		name := q.Name.String()
		s.mu.Lock()
		if s.queries[name] == nil {
			s.queries[name] = &atomic.Int64{}
		}
		s.queries[name].Add(1)
		addrs, known := s.records[name]
		s.mu.Unlock()
		rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
		if !known {
			rh.RCode = dnsmessage.RCodeNameError
		}
		b := dnsmessage.NewBuilder(nil, rh)
		b.EnableCompression()
		_ = b.StartQuestions()
		_ = b.Question(q)
		_ = b.StartAnswers()
		for _, a := range addrs {
			rr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}
			switch {
			case a.Is4() && q.Type == dnsmessage.TypeA:
				_ = b.AResource(rr, dnsmessage.AResource{A: a.As4()})
			case a.Is6() && q.Type == dnsmessage.TypeAAAA:
				_ = b.AAAAResource(rr, dnsmessage.AAAAResource{AAAA: a.As16()})
			}
		}
		msg, err := b.Finish()
		if err != nil {
			continue
		}
		_, _ = s.conn.WriteTo(msg, addr)
	}
}
