package main

// TLS (SPEC §10, R10.1-R10.4) without an engine: connect's ca_file is validated before anything is
// dialled, and a rediss:// session speaks TLS from its first byte, trusts ca_file's CAs only and
// checks the host name. The server here is an in-process TLS front with certificates made by the
// test (a CA, a server certificate for "localhost" only, one from another CA, an expired one) that
// records each connection's first byte and answers the fence read.

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serial int64 = 1

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key := newKey(t)
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// leaf is a server certificate of ca for the DNS name dns (no IP SAN), valid from nb to na.
func (ca *testCA) leaf(t *testing.T, dns string, nb, na time.Time) tls.Certificate {
	t.Helper()
	key := newKey(t)
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: dns},
		DNSNames: []string{dns}, NotBefore: nb, NotAfter: na,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// tlsFront is a TLS server on loopback that records each connection's first byte and the
// commands it received over TLS; it answers HGETALL of the fence with the bundle's fence and
// anything else with +OK.
type tlsFront struct {
	ln       net.Listener
	mu       sync.Mutex
	first    []byte   // first byte of every accepted connection
	commands []string // commands read after a completed handshake
	conns    []net.Conn
}

func startTLSFront(t *testing.T, b *Bundle, cert tls.Certificate) *tlsFront {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &tlsFront{ln: ln}
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
	})
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns = append(f.conns, c)
			f.mu.Unlock()
			go f.serve(c, cfg, b)
		}
	}()
	return f
}

// peeked replays the first byte read from a connection before the TLS server reads it.
type peeked struct {
	net.Conn
	r io.Reader
}

func (p *peeked) Read(b []byte) (int, error) { return p.r.Read(b) }

func (f *tlsFront) serve(c net.Conn, cfg *tls.Config, b *Bundle) {
	defer c.Close()
	one := make([]byte, 1)
	if _, err := io.ReadFull(c, one); err != nil {
		return
	}
	f.mu.Lock()
	f.first = append(f.first, one[0])
	f.mu.Unlock()
	if one[0] != 0x16 {
		return // not a TLS handshake record: never read RESP in plaintext
	}
	tc := tls.Server(&peeked{c, io.MultiReader(bytesReader(one), c)}, cfg)
	if err := tc.Handshake(); err != nil {
		return
	}
	r := bufio.NewReader(tc)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		f.mu.Lock()
		f.commands = append(f.commands, strings.Join(args, " "))
		f.mu.Unlock()
		if strings.EqualFold(args[0], "HGETALL") {
			fmt.Fprintf(tc, "*6\r\n%s%s%s%s%s%s", bulk("protocol"), bulk(b.Protocol), bulk("bundle"),
				bulk(b.Version), bulk("digest"), bulk(b.Digest))
		} else {
			tc.Write([]byte("+OK\r\n"))
		}
	}
}

func bytesReader(b []byte) io.Reader { return strings.NewReader(string(b)) }

func bulk(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }

func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("not an array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("bad array header %q", line)
	}
	args := make([]string, n)
	for i := range args {
		h, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		l, err := strconv.Atoi(strings.TrimSpace(h[1:]))
		if err != nil {
			return nil, err
		}
		buf := make([]byte, l+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:l])
	}
	return args, nil
}

func (f *tlsFront) port() int { return f.ln.Addr().(*net.TCPAddr).Port }

func (f *tlsFront) seen() ([]byte, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]byte{}, f.first...), append([]string{}, f.commands...)
}

// countingListener counts the connections dialled to it (a connect refused as invalid must not
// open one).
func countingListener(t *testing.T) (addr string, count func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	n := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
			c.Close()
		}
	}()
	return ln.Addr().String(), func() int {
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

func TestTLSTargetWithCAFile(t *testing.T) {
	ca := newCA(t, "test CA")
	caFile := writeFile(t, "ca.pem", ca.pem)
	tg, err := ParseTarget("rediss://:pw@localhost:6390/3", false)
	if err != nil || !tg.TLS || tg.Addr != "localhost:6390" || tg.Password != "pw" || tg.DB != 3 {
		t.Fatalf("%+v %v", tg, err)
	}
	if err := tg.LoadCAFile(caFile); err != nil || tg.RootCAs == nil || tg.CAFile != caFile {
		t.Fatalf("ca_file refused: %v", err)
	}
	cfg, cerr := tg.tlsConfig("localhost:6390")
	if cerr != nil || cfg.InsecureSkipVerify || cfg.ServerName != "localhost" || cfg.RootCAs != tg.RootCAs {
		t.Fatalf("tls config %+v %v", cfg, cerr)
	}
	// A cluster node's connection is checked against that node's host name.
	if cfg, _ := tg.tlsConfig("node7.example:7000"); cfg.ServerName != "node7.example" {
		t.Fatalf("node server name %q", cfg.ServerName)
	}
	if tg, err := ParseTarget("REDISS://localhost:1", true); err != nil || !tg.TLS || !tg.Cluster || tg.RootCAs != nil {
		t.Fatalf("rediss without ca_file: %+v %v", tg, err)
	}
	if tg, err := ParseTarget("rediss://emq:pw@localhost:1/9", true); err != nil || !tg.TLS || !tg.Cluster || tg.DB != 9 {
		t.Fatalf("a rediss:// cluster url with a database (R8.5): %+v %v", tg, err)
	}
	if tg, err := ParseTarget("redis://localhost:1/0", false); err != nil || tg.TLS {
		t.Fatalf("redis: %+v %v", tg, err)
	}
}

// Every one of these connects is invalid and opens no connection (R10.1: nothing is sent).
func TestTLSConnectValidationDialsNothing(t *testing.T) {
	ca := newCA(t, "test CA")
	caFile := writeFile(t, "ca.pem", ca.pem)
	noCert := writeFile(t, "nocert.pem", []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	empty := writeFile(t, "empty.pem", nil)
	garbled := writeFile(t, "garbled.pem", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	unreadable := writeFile(t, "unreadable.pem", ca.pem)
	os.Chmod(unreadable, 0)
	addr, count := countingListener(t)
	s := NewServer(testBundle(t))
	q := strconv.Quote
	cases := []string{
		// ca_file with a redis:// url (case connect-ca-file-needs-rediss)
		`{"seq":1,"cmd":"connect","session":"w","url":"redis://:pw@` + addr + `/0","ca_file":` + q(caFile) + `}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"redis://` + addr + `/0","ca_file":` + q(caFile) + `,"cluster":true}`,
		// a ca_file that cannot be read or holds no certificate
		`{"seq":1,"cmd":"connect","session":"w","url":"rediss://:pw@` + addr + `/0","ca_file":` + q(caFile+".missing") + `}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"rediss://:pw@` + addr + `/0","ca_file":` + q(filepath.Dir(caFile)) + `}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"rediss://:pw@` + addr + `/0","ca_file":` + q(noCert) + `}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"rediss://:pw@` + addr + `/0","ca_file":` + q(empty) + `}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"rediss://:pw@` + addr + `/0","ca_file":` + q(garbled) + `}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"rediss://:pw@` + addr + `/0","ca_file":""}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"rediss://:pw@` + addr + `/0","ca_file":7}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"rediss://:pw@` + addr + `/0","ca_file":[` + q(caFile) + `]}`,
		// the url rule still holds for rediss://
		`{"seq":1,"cmd":"connect","session":"w","url":"rediss://` + addr + `/x","ca_file":` + q(caFile) + `}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"rediss://` + addr + `/1x","ca_file":` + q(caFile) + `,"cluster":true}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"rediss://` + addr + `/0?insecure=1","ca_file":` + q(caFile) + `}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"redisx://` + addr + `/0","ca_file":` + q(caFile) + `}`,
	}
	if os.Geteuid() != 0 { // root reads a file of mode 0 anyway
		cases = append(cases, `{"seq":1,"cmd":"connect","session":"w","url":"rediss://:pw@`+addr+`/0","ca_file":`+q(unreadable)+`}`)
	}
	for _, line := range cases {
		m := reply(t, s, line)
		if k := errKind(m); k != KindInvalid {
			t.Errorf("%s: %v, want kind invalid", line, m)
		}
	}
	if n := count(); n != 0 {
		t.Fatalf("%d connections were opened by connects refused as invalid", n)
	}
}

func TestTLSSessionVerifiesChainAndName(t *testing.T) {
	b := testBundle(t)
	ca := newCA(t, "session CA")
	other := newCA(t, "another CA")
	caFile := writeFile(t, "ca.pem", ca.pem)
	now := time.Now()
	good := ca.leaf(t, "localhost", now.Add(-time.Hour), now.Add(time.Hour))

	open := func(url string) (*Engine, *WireError) {
		tg, err := ParseTarget(url, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := tg.LoadCAFile(caFile); err != nil {
			t.Fatal(err)
		}
		return Open(b, tg, t.Logf)
	}

	t.Run("trusted", func(t *testing.T) {
		f := startTLSFront(t, b, good)
		e, err := open(fmt.Sprintf("rediss://:pw@localhost:%d/0", f.port()))
		if err != nil {
			t.Fatalf("connect over TLS with the session's CA: %v", err)
		}
		// A broken session reconnects at its next verb: that connection speaks TLS too (R10.2).
		e.Close()
		e.broken = true
		if err := e.ready(); err != nil {
			t.Fatalf("reconnect: %v", err)
		}
		e.Close()
		first, cmds := f.seen()
		if len(first) != 2 || first[0] != 0x16 || first[1] != 0x16 {
			t.Fatalf("first bytes %x, want two connections starting with a TLS handshake (16)", first)
		}
		if len(cmds) < 4 || cmds[0] != "AUTH pw" || !strings.HasPrefix(cmds[1], "HGETALL") {
			t.Fatalf("commands over TLS: %q", cmds)
		}
	})

	refused := []struct {
		name string
		cert tls.Certificate
		host string
		why  string
	}{
		{"another CA", other.leaf(t, "localhost", now.Add(-time.Hour), now.Add(time.Hour)), "localhost", "not signed by a trusted CA"},
		{"another name", ca.leaf(t, "elsewhere.example", now.Add(-time.Hour), now.Add(time.Hour)), "localhost", "does not name the host"},
		{"an address the certificate does not name", good, "127.0.0.1", "does not name the host"},
		{"expired", ca.leaf(t, "localhost", now.Add(-48*time.Hour), now.Add(-24*time.Hour)), "localhost", "expired"},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			f := startTLSFront(t, b, c.cert)
			e, err := open(fmt.Sprintf("rediss://:pw@%s:%d/0", c.host, f.port()))
			if err == nil {
				e.Close()
				t.Fatal("connect succeeded")
			}
			if err.Kind != KindEngine || !strings.Contains(err.Msg, c.why) {
				t.Fatalf("connect: %v, want kind engine saying %q", err, c.why)
			}
			first, cmds := f.seen()
			if len(first) != 1 || first[0] != 0x16 || len(cmds) != 0 {
				t.Fatalf("first bytes %x, commands %q: want one TLS handshake and no command", first, cmds)
			}
		})
	}

	t.Run("plaintext server", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		got := make(chan byte, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			one := make([]byte, 1)
			if _, err := io.ReadFull(c, one); err == nil {
				got <- one[0]
			}
			c.Write([]byte("-ERR plaintext server\r\n"))
		}()
		e, werr := open(fmt.Sprintf("rediss://:pw@localhost:%d/0", ln.Addr().(*net.TCPAddr).Port))
		if werr == nil {
			e.Close()
			t.Fatal("connect to a plaintext server succeeded")
		}
		if werr.Kind != KindEngine {
			t.Fatalf("connect: %v, want kind engine", werr)
		}
		if b := <-got; b != 0x16 {
			t.Fatalf("first byte %x, want a TLS handshake record (16)", b)
		}
	})
}
