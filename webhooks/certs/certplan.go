package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Keys of the certificate Secret. ca.crt is the CA bundle the API server
// is told to trust (the CA of the served certificate first, then CAs kept
// from earlier rotations); tls-next.* is a renewed serving certificate whose
// CA is already in the bundle but which is not served yet.
const (
	keyCA       = "ca.crt"
	keyCert     = "tls.crt"
	keyKey      = "tls.key"
	keyNextCert = "tls-next.crt"
	keyNextKey  = "tls-next.key"
)

// backdate is how far before its issue time a certificate is valid (clock
// skew between replicas and API servers). The issue time is read back from
// NotBefore, so it must stay the same for every replica.
const backdate = time.Hour

// maxBundleCAs bounds the CA bundle whatever happens to the Secret.
const maxBundleCAs = 4

// certPolicy is what a plan needs to know about the certificates wanted.
type certPolicy struct {
	hosts       []string
	commonName  string
	validity    time.Duration
	renewBefore time.Duration
	// promoteAfter is how long a renewed certificate waits, its CA in the
	// bundle, before it is served; overlap is how long a CA that no longer
	// signs the served certificate stays in the bundle (never past its
	// expiry).
	promoteAfter, overlap time.Duration
}

// planAction says what a plan changed.
type planAction string

const (
	planNone     planAction = ""
	planIssued   planAction = "issued"   // no usable certificate: a new one is served at once
	planRenewing planAction = "renewing" // a renewed certificate waits, its CA added to the bundle
	planRenewed  planAction = "renewed"  // the waiting certificate is now served
	planPruned   planAction = "pruned"   // CAs past their overlap left the bundle
)

// plan computes the next content of the certificate Secret from the
// current one at a time. trusted says the stored bundle is already in every
// injected configuration, so a waiting certificate may be promoted.
// injected is the bundle the API servers hold now: its CAs are kept like
// the stored ones (replicas may serve what they signed even when the
// Secret lost them). The reason explains planIssued (what was wrong with
// what was stored).
func plan(data map[string][]byte, now time.Time, p certPolicy, trusted bool, injected []byte) (map[string][]byte, planAction, string, error) {
	bundle := parseCerts(data[keyCA])
	cur, curErr := checkPair(data[keyCert], data[keyKey], bundle, now, p.hosts)
	next, nextErr := checkPair(data[keyNextCert], data[keyNextKey], bundle, now, p.hosts)
	out := map[string][]byte{}
	action := planNone
	reason := ""
	switch {
	case curErr != nil && nextErr == nil:
		// What is served is broken and a renewal is ready: serve it now.
		out[keyCert], out[keyKey] = data[keyNextCert], data[keyNextKey]
		cur, action, reason = next, planIssued, curErr.Error()
	case curErr != nil:
		ca, pair, err := issue(now, p)
		if err != nil {
			return nil, planNone, "", err
		}
		bundle = append([]*x509.Certificate{ca}, bundle...)
		out[keyCert], out[keyKey] = pair.cert, pair.key
		cur, action, reason = pair.leaf, planIssued, curErr.Error()
	default:
		out[keyCert], out[keyKey] = data[keyCert], data[keyKey]
		switch {
		case nextErr == nil && trusted && !now.Before(issuedAt(next).Add(p.promoteAfter)):
			out[keyCert], out[keyKey] = data[keyNextCert], data[keyNextKey]
			cur, action = next, planRenewed
		case nextErr == nil:
			out[keyNextCert], out[keyNextKey] = data[keyNextCert], data[keyNextKey]
		case now.Add(p.renewBefore).After(cur.NotAfter):
			ca, pair, err := issue(now, p)
			if err != nil {
				return nil, planNone, "", err
			}
			bundle = append([]*x509.Certificate{ca}, bundle...)
			out[keyNextCert], out[keyNextKey] = pair.cert, pair.key
			action = planRenewing
		}
	}
	var pending *x509.Certificate
	if len(out[keyNextCert]) > 0 {
		pending = firstCert(out[keyNextCert])
	}
	kept := keepCAs(append(bundle, parseCerts(injected)...), cur, pending, now, p.promoteAfter+p.overlap)
	out[keyCA] = encodeCerts(kept)
	if action == planNone && !bytes.Equal(out[keyCA], data[keyCA]) {
		action = planPruned
	}
	if action == planNone && (len(data[keyNextCert]) > 0) != (len(out[keyNextCert]) > 0) {
		action = planPruned // a broken waiting certificate was dropped
	}
	return out, action, reason, nil
}

// keepCAs orders the bundle: the CA of the served certificate first, then
// the CA of the waiting one, then older CAs still within their overlap;
// expired CAs and duplicates go.
func keepCAs(bundle []*x509.Certificate, cur, pending *x509.Certificate, now time.Time, retain time.Duration) []*x509.Certificate {
	signs := func(ca, leaf *x509.Certificate) bool { return leaf != nil && leaf.CheckSignatureFrom(ca) == nil }
	var first, second, rest []*x509.Certificate
	seen := map[string]bool{}
	for _, ca := range bundle {
		if seen[string(ca.Raw)] || now.After(ca.NotAfter) {
			continue
		}
		seen[string(ca.Raw)] = true
		switch {
		case signs(ca, cur):
			first = append(first, ca)
		case signs(ca, pending):
			second = append(second, ca)
		case cur != nil && now.Before(issuedAt(cur).Add(retain)):
			// Replicas may still serve what this CA signed: keep it for
			// the overlap after the served certificate took over.
			rest = append(rest, ca)
		}
	}
	out := append(append(first, second...), rest...)
	if len(out) > maxBundleCAs {
		out = out[:maxBundleCAs]
	}
	return out
}

// issuedAt is when a certificate of ours was made.
func issuedAt(c *x509.Certificate) time.Time { return c.NotBefore.Add(backdate) }

// checkPair says why a serving certificate and key cannot be served: they
// are missing or unreadable, the key does not match, the certificate is not
// signed by a CA of the bundle, has expired or does not cover every host.
func checkPair(certPEM, keyPEM []byte, bundle []*x509.Certificate, now time.Time, hosts []string) (*x509.Certificate, error) {
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, errors.New("no certificate")
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("certificate and key do not form a pair: %w", err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("unreadable certificate: %w", err)
		}
	}
	if now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("certificate expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	roots := x509.NewCertPool()
	for _, ca := range bundle {
		roots.AddCert(ca)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return nil, fmt.Errorf("certificate not signed by the CA bundle: %w", err)
	}
	for _, h := range hosts {
		if err := leaf.VerifyHostname(h); err != nil {
			return nil, fmt.Errorf("certificate does not cover %s", h)
		}
	}
	return leaf, nil
}

// issued is a serving certificate and its key, PEM-encoded.
type issued struct {
	cert, key []byte
	leaf      *x509.Certificate
}

// issue makes a new CA and a serving certificate signed by it. The CA's
// key is dropped: a renewal makes a new CA.
func issue(now time.Time, p certPolicy) (*x509.Certificate, issued, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, issued{}, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "agent-sandbox-webhook-ca"},
		NotBefore: now.Add(-backdate), NotAfter: now.Add(p.validity),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, issued{}, fmt.Errorf("creating webhook CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, issued{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, issued{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: p.commonName},
		NotBefore: now.Add(-backdate), NotAfter: now.Add(p.validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range p.hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, issued{}, fmt.Errorf("creating webhook serving certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, issued{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, issued{}, err
	}
	return ca, issued{
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		leaf: leaf,
	}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

// parseCerts reads every certificate of a PEM bundle, skipping what does
// not parse.
func parseCerts(b []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for len(b) > 0 {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			out = append(out, c)
		}
	}
	return out
}

func firstCert(b []byte) *x509.Certificate {
	if cs := parseCerts(b); len(cs) > 0 {
		return cs[0]
	}
	return nil
}

func encodeCerts(cs []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range cs {
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return buf.Bytes()
}
