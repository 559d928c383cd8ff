package main

// Behind Sentinel (SPEC §11) without an engine: connect's sentinel field is validated before
// anything is dialled; discovery asks the Sentinels in order past a refusing, a silent, an erring, a
// null and a stale one (R11.1, R11.2); a Sentinel gets AUTH and SENTINEL get-master-addr-by-name
// only, on a connection closed after the answer (R11.4); a named node gets ROLE before anything
// but AUTH and nothing after a ROLE that is not master; READONLY or a lost connection fails the
// call (never re-sent) and the next call asks the Sentinels again, reads the fence on the new
// primary first and loads the script there on NOSCRIPT (R11.3); over rediss:// every Sentinel
// connection speaks TLS too. The servers here are in-process fakes that speak enough RESP.

import (
	"bufio"
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeServer is a RESP server on loopback: handle answers each command (its raw RESP reply, or ""
// for no answer at all); it records every command, per connection, and which connections the
// client closed.
type fakeServer struct {
	t      *testing.T
	ln     net.Listener
	tlsCfg *tls.Config // non-nil: TLS only, the first byte must be a handshake record
	mu     sync.Mutex
	handle func(f *fakeServer, args []string) string
	conns  [][]string // commands per accepted connection, in order
	closed []bool     // the client closed that connection
	first  []byte     // first byte of every accepted connection
	open   []net.Conn
}

func startFake(t *testing.T, cfg *tls.Config, handle func(f *fakeServer, args []string) string) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return startFakeOn(t, ln, cfg, handle)
}

// startFakeOn is startFake on a listener of the caller's (another loopback address, a given port).
func startFakeOn(t *testing.T, ln net.Listener, cfg *tls.Config, handle func(f *fakeServer, args []string) string) *fakeServer {
	f := &fakeServer{t: t, ln: ln, tlsCfg: cfg, handle: handle}
	t.Cleanup(f.stop)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			idx := len(f.conns)
			f.conns = append(f.conns, nil)
			f.closed = append(f.closed, false)
			f.open = append(f.open, c)
			f.mu.Unlock()
			go f.serve(c, idx)
		}
	}()
	return f
}

func (f *fakeServer) stop() {
	f.ln.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.open {
		c.Close()
	}
}

func (f *fakeServer) addr() string { return f.ln.Addr().String() }
func (f *fakeServer) port() int    { return f.ln.Addr().(*net.TCPAddr).Port }
func (f *fakeServer) host() string { return f.ln.Addr().(*net.TCPAddr).IP.String() }

func (f *fakeServer) serve(c net.Conn, idx int) {
	defer c.Close()
	var rw io.ReadWriter = c
	one := make([]byte, 1)
	if _, err := io.ReadFull(c, one); err != nil {
		f.markClosed(idx)
		return
	}
	f.mu.Lock()
	f.first = append(f.first, one[0])
	f.mu.Unlock()
	src := io.MultiReader(bytesReader(one), c)
	if f.tlsCfg != nil {
		if one[0] != 0x16 {
			return
		}
		tc := tls.Server(&peeked{c, src}, f.tlsCfg)
		if err := tc.Handshake(); err != nil {
			return
		}
		rw, src = tc, tc
	}
	r := bufio.NewReader(src)
	for {
		args, err := readCommand(r)
		if err != nil {
			f.markClosed(idx)
			return
		}
		f.mu.Lock()
		f.conns[idx] = append(f.conns[idx], strings.Join(args, " "))
		f.mu.Unlock()
		if out := f.handle(f, args); out != "" {
			rw.Write([]byte(out))
		}
	}
}

func (f *fakeServer) markClosed(idx int) {
	f.mu.Lock()
	f.closed[idx] = true
	f.mu.Unlock()
}

// seen returns a copy of every connection's commands and closed flags, after a short settle.
func (f *fakeServer) seen() ([][]string, []bool) {
	time.Sleep(30 * time.Millisecond)
	f.mu.Lock()
	defer f.mu.Unlock()
	cs := make([][]string, len(f.conns))
	for i, c := range f.conns {
		cs[i] = append([]string{}, c...)
	}
	return cs, append([]bool{}, f.closed...)
}

// sentinelAnswering is a Sentinel that names addr (nothing when addr is "", null when "null",
// an error reply when "err").
func sentinelAnswering(addr *string, mu *sync.Mutex) func(*fakeServer, []string) string {
	return func(_ *fakeServer, args []string) string {
		switch strings.ToUpper(args[0]) {
		case "AUTH":
			return "+OK\r\n"
		case "SENTINEL":
			if len(args) == 3 && strings.EqualFold(args[1], "get-master-addr-by-name") && args[2] == "emq" {
				mu.Lock()
				a := *addr
				mu.Unlock()
				switch a {
				case "null":
					return "*-1\r\n"
				case "err":
					return "-ERR the Sentinel is confused\r\n"
				}
				h, p, _ := net.SplitHostPort(a)
				return "*2\r\n" + bulk(h) + bulk(p)
			}
		}
		return "-NOPERM this user has no permissions to run the '" + args[0] + "' command\r\n"
	}
}

func silent(*fakeServer, []string) string { return "" }

// fakeNode is a data node: role "master" or "slave"; with readonly set it answers every EVALSHA
// READONLY (a demoted primary behind a proxy that keeps connections open).
type fakeNode struct {
	*fakeServer
	b        *Bundle
	role     string
	mu       sync.Mutex
	readonly bool
	loaded   map[string]bool
	delay    time.Duration // held before the next EVALSHA reply, once
}

func startNode(t *testing.T, b *Bundle, role string, cfg *tls.Config) *fakeNode {
	n := &fakeNode{b: b, role: role, loaded: map[string]bool{}}
	n.fakeServer = startFake(t, cfg, func(_ *fakeServer, args []string) string {
		n.mu.Lock()
		defer n.mu.Unlock()
		switch strings.ToUpper(args[0]) {
		case "AUTH", "SELECT":
			return "+OK\r\n"
		case "ROLE":
			if n.role == "master" {
				return "*3\r\n" + bulk("master") + ":0\r\n*0\r\n"
			}
			return "*5\r\n" + bulk("slave") + bulk("127.0.0.1") + ":1\r\n" + bulk("connected") + ":0\r\n"
		case "HGETALL":
			return fmt.Sprintf("*6\r\n%s%s%s%s%s%s", bulk("protocol"), bulk(b.Protocol), bulk("bundle"),
				bulk(b.Version), bulk("digest"), bulk(b.Digest))
		case "SCRIPT":
			sum := sha1.Sum([]byte(args[2]))
			sha := hex.EncodeToString(sum[:])
			n.loaded[sha] = true
			return bulk(sha)
		case "INCR":
			return ":1\r\n"
		case "EVALSHA":
			time.Sleep(n.delay)
			n.delay = 0
			if n.readonly {
				return "-READONLY You can't write against a read only replica.\r\n"
			}
			if !n.loaded[args[1]] {
				return "-NOSCRIPT No matching script.\r\n"
			}
			return bulk("j0000000000000001")
		}
		return "-ERR unexpected " + args[0] + "\r\n"
	})
	return n
}

// deadAddr is an address that refuses connections.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().String()
	l.Close()
	return a
}

func openSentinel(t *testing.T, b *Bundle, url string, nodes []string, caFile string) (*Engine, *WireError) {
	t.Helper()
	tg, err := ParseTarget(url, false)
	if err != nil {
		t.Fatal(err)
	}
	if caFile != "" {
		if err := tg.LoadCAFile(caFile); err != nil {
			t.Fatal(err)
		}
	}
	if err := tg.UseSentinel(&SentinelField{Name: "emq", Nodes: nodes}); err != nil {
		t.Fatal(err)
	}
	return Open(b, tg, t.Logf)
}

// Every one of these connects is invalid and opens no connection (R11.1: nothing is sent).
func TestSentinelConnectValidationDialsNothing(t *testing.T) {
	addr, count := countingListener(t)
	s := NewServer(testBundle(t))
	url := `"url":"redis://emq:pw@` + addr + `/3"`
	q := strconv.Quote(addr)
	bad := []string{
		`"sentinel":"emq"`,
		`"sentinel":[` + q + `]`,
		`"sentinel":true`,
		`"sentinel":{}`,
		`"sentinel":{"nodes":[` + q + `]}`,
		`"sentinel":{"name":"","nodes":[` + q + `]}`,
		`"sentinel":{"name":7,"nodes":[` + q + `]}`,
		`"sentinel":{"name":null,"nodes":[` + q + `]}`,
		`"sentinel":{"name":"emq"}`,
		`"sentinel":{"name":"emq","nodes":null}`,
		`"sentinel":{"name":"emq","nodes":[]}`,
		`"sentinel":{"name":"emq","nodes":` + q + `}`,
		`"sentinel":{"name":"emq","nodes":[7]}`,
		`"sentinel":{"name":"emq","nodes":[null]}`,
		`"sentinel":{"name":"emq","nodes":[` + q + `,"127.0.0.1"]}`,
		`"sentinel":{"name":"emq","nodes":["127.0.0.1:0"]}`,
		`"sentinel":{"name":"emq","nodes":["127.0.0.1:65536"]}`,
		`"sentinel":{"name":"emq","nodes":["127.0.0.1:-1"]}`,
		`"sentinel":{"name":"emq","nodes":["127.0.0.1:+26379"]}`,
		`"sentinel":{"name":"emq","nodes":["127.0.0.1:x"]}`,
		`"sentinel":{"name":"emq","nodes":["127.0.0.1:"]}`,
		`"sentinel":{"name":"emq","nodes":[":26379"]}`,
		`"sentinel":{"name":"emq","nodes":[""]}`,
		`"sentinel":{"name":"emq","nodes":["redis://127.0.0.1:26379"]}`,
		`"sentinel":{"name":"emq","nodes":[` + q + `]},"cluster":true`,
	}
	for _, f := range bad {
		line := `{"seq":1,"cmd":"connect","session":"w",` + url + `,` + f + `}`
		if k := errKind(reply(t, s, line)); k != KindInvalid {
			t.Errorf("%s: kind %q, want invalid", line, k)
		}
	}
	// The url rule still holds behind Sentinel.
	for _, u := range []string{"redis://" + addr + "/x", "http://" + addr, "redis://" + addr + "/0?x=1"} {
		line := `{"seq":1,"cmd":"connect","session":"w","url":"` + u + `","sentinel":{"name":"emq","nodes":[` + q + `]}}`
		if k := errKind(reply(t, s, line)); k != KindInvalid {
			t.Errorf("%s: kind %q, want invalid", line, k)
		}
	}
	if n := count(); n != 0 {
		t.Fatalf("%d connections were opened by connects refused as invalid", n)
	}
	var sf *SentinelField
	req, _ := ParseRequest([]byte(`{"cmd":"connect","sentinel":{"name":"emq","nodes":["127.0.0.1:1","[::1]:26379","localhost:65535"],"extra":1}}`))
	if sf, _ = req.OptSentinel(); sf == nil || sf.Name != "emq" || len(sf.Nodes) != 3 {
		t.Fatalf("a valid sentinel field: %+v", sf)
	}
	req, _ = ParseRequest([]byte(`{"cmd":"connect","sentinel":null}`))
	if sf, err := req.OptSentinel(); sf != nil || err != nil {
		t.Fatalf("sentinel null must be absent: %+v %v", sf, err)
	}
}

// Discovery past a refusing, a silent, an erring, a null and a stale Sentinel (R11.1, R11.2, R11.4).
func TestSentinelDiscoveryPastBadSentinels(t *testing.T) {
	b := testBundle(t)
	primary := startNode(t, b, "master", nil)
	replica := startNode(t, b, "slave", nil)
	var mu sync.Mutex
	mk := func(a string) *fakeServer {
		addr := a
		return startFake(t, nil, sentinelAnswering(&addr, &mu))
	}
	quiet := startFake(t, nil, silent)
	errs := mk("err")
	null := mk("null")
	stale := mk(replica.addr())
	good := mk(primary.addr())
	gone := mk(deadAddr(t))
	nodes := []string{deadAddr(t), quiet.addr(), errs.addr(), null.addr(), gone.addr(), stale.addr(), good.addr()}

	start := time.Now()
	e, werr := openSentinel(t, b, "redis://emq:pw@"+nodes[0]+"/3", nodes, "")
	if werr != nil {
		t.Fatalf("connect: %v", werr)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("connect took %v past one silent Sentinel", d)
	}
	if e.primary != primary.addr() {
		t.Fatalf("primary %s, want %s", e.primary, primary.addr())
	}
	if _, werr := e.Enqueue("q", "x", 0); werr != nil {
		t.Fatalf("enqueue: %v", werr)
	}
	e.Close()

	for _, f := range []*fakeServer{quiet, errs, null, stale, good, gone} {
		cs, closed := f.seen()
		if len(cs) != 1 {
			t.Fatalf("Sentinel %s: %d connections, want 1", f.addr(), len(cs))
		}
		want := []string{"AUTH emq pw", "SENTINEL get-master-addr-by-name emq"}
		if f == quiet {
			want = want[:1] // it never answered AUTH
		}
		if strings.Join(cs[0], "|") != strings.Join(want, "|") {
			t.Errorf("Sentinel %s got %q, want %q (R11.4: no SELECT, no ROLE, no INFO)", f.addr(), cs[0], want)
		}
		if !closed[0] {
			t.Errorf("Sentinel %s: the connection was left open", f.addr())
		}
	}
	cs, closed := replica.seen()
	if len(cs) != 1 || strings.Join(cs[0], "|") != "AUTH emq pw|ROLE" || !closed[0] {
		t.Fatalf("the replica got %q (closed %v): want AUTH and ROLE only, then closed", cs, closed)
	}
	cs, closed = primary.seen()
	if len(cs) != 1 || len(cs[0]) < 4 || strings.Join(cs[0][:4], "|") != "AUTH emq pw|ROLE|SELECT 3|HGETALL emq:fence" || !closed[0] {
		t.Fatalf("the primary got %q (closed %v): want AUTH, ROLE, SELECT 3, the fence first", cs, closed)
	}
}

func TestSentinelDiscoveryFailsWithEngineSayingWhy(t *testing.T) {
	b := testBundle(t)
	replica := startNode(t, b, "slave", nil)
	var mu sync.Mutex
	null, stale := "null", replica.addr()
	cases := []struct {
		nodes []string
		why   string
	}{
		{[]string{deadAddr(t), startFake(t, nil, silent).addr()}, "no Sentinel answered"},
		{[]string{deadAddr(t), startFake(t, nil, sentinelAnswering(&null, &mu)).addr()}, `no Sentinel knows the name "emq"`},
		{[]string{startFake(t, nil, sentinelAnswering(&stale, &mu)).addr()}, "ROLE says slave"},
	}
	for _, c := range cases {
		e, werr := openSentinel(t, b, "redis://emq:pw@"+c.nodes[0]+"/3", c.nodes, "")
		if werr == nil {
			e.Close()
			t.Fatalf("%v: connect succeeded", c.nodes)
		}
		if werr.Kind != KindEngine || !strings.Contains(werr.Msg, c.why) {
			t.Fatalf("connect: %v, want kind engine saying %q", werr, c.why)
		}
	}
}

// Every Sentinel names a node that accepts the connection, reads every command and answers none
// (a stopped primary behind a proxy), or one that answers ROLE master and then nothing: each named
// node's whole check, the AUTH sent inside the dial included, ends within namedTimeout, so
// connect fails with kind engine well inside R5.8's 10 s (R11.1). With ioTimeout on the AUTH and
// the SELECT it took 3 x 4 s.
func TestSentinelSilentNamedNodesAreBounded(t *testing.T) {
	b := testBundle(t)
	quiet := startFake(t, nil, silent)
	mute := startFake(t, nil, func(_ *fakeServer, args []string) string {
		switch strings.ToUpper(args[0]) {
		case "AUTH":
			return "+OK\r\n"
		case "ROLE":
			return "*3\r\n" + bulk("master") + ":0\r\n*0\r\n"
		}
		return ""
	})
	var mu sync.Mutex
	qa, ma := quiet.addr(), mute.addr()
	nodes := []string{
		startFake(t, nil, sentinelAnswering(&qa, &mu)).addr(),
		startFake(t, nil, sentinelAnswering(&ma, &mu)).addr(),
		startFake(t, nil, sentinelAnswering(&qa, &mu)).addr(),
	}
	start := time.Now()
	e, werr := openSentinel(t, b, "redis://emq:pw@"+nodes[0]+"/3", nodes, "")
	took := time.Since(start)
	if werr == nil {
		e.Close()
		t.Fatal("connect succeeded with no node answering")
	}
	if werr.Kind != KindEngine || !strings.Contains(werr.Msg, "no Sentinel named a primary") {
		t.Fatalf("connect: %v, want kind engine saying no Sentinel named a primary", werr)
	}
	if took > 8*time.Second {
		t.Fatalf("connect took %v with three Sentinels naming silent nodes (want about 3 x %v)", took, namedTimeout)
	}
	cs, closed := quiet.seen()
	if len(cs) != 2 || strings.Join(cs[0], "|") != "AUTH emq pw" || strings.Join(cs[1], "|") != "AUTH emq pw" || !closed[0] || !closed[1] {
		t.Fatalf("the silent node got %q (closed %v): want AUTH alone on each of two connections, closed", cs, closed)
	}
	cs, closed = mute.seen()
	if len(cs) != 1 || strings.Join(cs[0], "|") != "AUTH emq pw|ROLE|SELECT 3" || !closed[0] {
		t.Fatalf("the node silent after ROLE got %q (closed %v): want AUTH, ROLE, SELECT 3, closed", cs, closed)
	}
}

// Over rediss:// a named node that completes the TLS handshake and then answers nothing costs
// namedTimeout, not ioTimeout; and the primary found next has the session's own read timeout
// back: a reply held past namedTimeout (but within ioTimeout, as G5 holds one 2 s) still arrives.
func TestSentinelSilentNamedNodeOverTLSThenSessionTimeout(t *testing.T) {
	b := testBundle(t)
	ca := newCA(t, "session CA")
	caFile := writeFile(t, "ca.pem", ca.pem)
	now := time.Now()
	cfg := &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, "localhost", now.Add(-time.Hour), now.Add(time.Hour))}}
	quiet := startFake(t, cfg, silent)
	primary := startNode(t, b, "master", cfg)
	held := namedTimeout + 500*time.Millisecond
	primary.mu.Lock()
	primary.delay = held
	primary.mu.Unlock()
	var mu sync.Mutex
	qa := "localhost:" + strconv.Itoa(quiet.port())
	pa := "localhost:" + strconv.Itoa(primary.port())
	s1 := startFake(t, cfg, sentinelAnswering(&qa, &mu))
	s2 := startFake(t, cfg, sentinelAnswering(&pa, &mu))
	nodes := []string{"localhost:" + strconv.Itoa(s1.port()), "localhost:" + strconv.Itoa(s2.port())}
	start := time.Now()
	e, werr := openSentinel(t, b, "rediss://emq:pw@"+nodes[0]+"/2", nodes, caFile)
	took := time.Since(start)
	if werr != nil {
		t.Fatalf("connect past a silent TLS node: %v", werr)
	}
	defer e.Close()
	if took > namedTimeout+time.Second {
		t.Fatalf("connect took %v past one silent TLS node (want about %v)", took, namedTimeout)
	}
	if cs, _ := quiet.seen(); len(cs) != 1 || strings.Join(cs[0], "|") != "AUTH emq pw" {
		t.Fatalf("the silent TLS node got %q, want AUTH alone", cs)
	}
	if _, werr := e.Enqueue("q", "x", 0); werr != nil {
		t.Fatalf("enqueue with its reply held %v: %v (the session's read timeout is %v)", held, werr, ioTimeout)
	}
}

// READONLY, then a lost connection: the call fails with engine and is not re-sent; the next call
// asks the Sentinels again, ROLE, the fence, then its script (NOSCRIPT: loaded there) (R11.3).
func TestSentinelResolvesAgainAfterReadonlyAndLoss(t *testing.T) {
	b := testBundle(t)
	old := startNode(t, b, "master", nil)
	promoted := startNode(t, b, "master", nil)
	var mu sync.Mutex
	named := old.addr()
	sent := startFake(t, nil, sentinelAnswering(&named, &mu))
	e, werr := openSentinel(t, b, "redis://:pw@"+sent.addr()+"/0", []string{sent.addr()}, "")
	if werr != nil {
		t.Fatalf("connect: %v", werr)
	}
	defer e.Close()
	if _, werr := e.Enqueue("q", "x", 0); werr != nil {
		t.Fatalf("enqueue: %v", werr)
	}
	// The failover: the old primary (its connection held open) answers READONLY; the Sentinel
	// names the promoted replica, whose script cache is empty.
	old.mu.Lock()
	old.readonly, old.role = true, "slave"
	old.mu.Unlock()
	mu.Lock()
	named = promoted.addr()
	mu.Unlock()
	if _, werr := e.Enqueue("q", "x", 0); werr == nil || werr.Kind != KindEngine || !strings.Contains(werr.Msg, "READONLY") {
		t.Fatalf("enqueue on the demoted primary: %v, want kind engine naming READONLY", werr)
	}
	cs, closed := old.seen()
	evalshas := 0
	for _, c := range cs[0] {
		if strings.HasPrefix(c, "EVALSHA") {
			evalshas++
		}
	}
	if len(cs) != 1 || !closed[0] || evalshas != 3 { // NOSCRIPT + EVALSHA, then the READONLY one, once
		t.Fatalf("old primary: %q closed %v: want one connection, closed, the failed call sent once", cs, closed)
	}
	if _, werr := e.Enqueue("q", "x", 0); werr != nil {
		t.Fatalf("enqueue after the failover: %v", werr)
	}
	cs, _ = promoted.seen()
	want := "AUTH|ROLE|HGETALL|EVALSHA|SCRIPT|EVALSHA"
	var got []string
	for _, c := range cs[0] {
		got = append(got, strings.Fields(c)[0])
	}
	if len(cs) != 1 || strings.Join(got, "|") != want {
		t.Fatalf("promoted primary got %q, want %s", got, want)
	}
	scs, _ := sent.seen()
	if len(scs) != 2 {
		t.Fatalf("the Sentinel was asked %d times, want 2 (connect, after READONLY)", len(scs))
	}

	// A lost connection: the call fails, the next call asks again; when no Sentinel answers, that
	// call fails with engine and the one after it tries again.
	promoted.stop()
	if _, werr := e.Enqueue("q", "x", 0); werr == nil || werr.Kind != KindEngine {
		t.Fatalf("enqueue on a lost connection: %v, want kind engine", werr)
	}
	sent.stop()
	if _, werr := e.Enqueue("q", "x", 0); werr == nil || werr.Kind != KindEngine || !strings.Contains(werr.Msg, "no Sentinel answered") {
		t.Fatalf("enqueue with no Sentinel: %v, want kind engine saying no Sentinel answered", werr)
	}
	back := startFake(t, nil, sentinelAnswering(&named, &mu))
	third := startNode(t, b, "master", nil)
	mu.Lock()
	named = third.addr()
	mu.Unlock()
	e.t.Sentinel.Nodes = []string{deadAddr(t), back.addr()}
	if _, werr := e.Enqueue("q", "x", 0); werr != nil {
		t.Fatalf("enqueue once a Sentinel answers again: %v", werr)
	}
	if _, werr := e.Probe("k", 3); werr != nil {
		t.Fatalf("probe: %v", werr)
	}
}

// rediss://: every Sentinel connection and every data node connection speaks TLS, verified against
// the session's CA and the host a Sentinel or nodes names (R10.2, R11.1).
func TestSentinelOverTLS(t *testing.T) {
	b := testBundle(t)
	ca := newCA(t, "session CA")
	caFile := writeFile(t, "ca.pem", ca.pem)
	now := time.Now()
	cfg := &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, "localhost", now.Add(-time.Hour), now.Add(time.Hour))}}
	primary := startNode(t, b, "master", cfg)
	replica := startNode(t, b, "slave", cfg)
	var mu sync.Mutex
	stale := "localhost:" + strconv.Itoa(replica.port())
	good := "localhost:" + strconv.Itoa(primary.port())
	s1 := startFake(t, cfg, sentinelAnswering(&stale, &mu))
	s2 := startFake(t, cfg, sentinelAnswering(&good, &mu))
	nodes := []string{"localhost:" + strconv.Itoa(s1.port()), "localhost:" + strconv.Itoa(s2.port())}
	e, werr := openSentinel(t, b, "rediss://emq:pw@"+nodes[0]+"/2", nodes, caFile)
	if werr != nil {
		t.Fatalf("connect over TLS: %v", werr)
	}
	if _, werr := e.Enqueue("q", "x", 0); werr != nil {
		t.Fatal(werr)
	}
	e.Close()
	for _, f := range []*fakeServer{s1, s2, replica.fakeServer, primary.fakeServer} {
		cs, _ := f.seen()
		f.mu.Lock()
		first := append([]byte{}, f.first...)
		f.mu.Unlock()
		if len(first) != 1 || first[0] != 0x16 || len(cs) != 1 || cs[0][0] != "AUTH emq pw" {
			t.Fatalf("%s: first bytes %x, commands %q: want one TLS connection, AUTH first", f.addr(), first, cs)
		}
	}

	// A Sentinel whose certificate names another host is skipped like a refusing one.
	other := &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, "elsewhere.example", now.Add(-time.Hour), now.Add(time.Hour))}}
	bad := startFake(t, other, sentinelAnswering(&good, &mu))
	nodes = []string{"localhost:" + strconv.Itoa(bad.port()), "localhost:" + strconv.Itoa(s2.port())}
	e, werr = openSentinel(t, b, "rediss://emq:pw@"+nodes[0]+"/2", nodes, caFile)
	if werr != nil {
		t.Fatalf("connect past a Sentinel with another name: %v", werr)
	}
	e.Close()
	if cs, _ := bad.seen(); len(cs) != 1 || len(cs[0]) != 0 {
		t.Fatalf("a Sentinel with a certificate for another name received %q", cs)
	}
	// Only that Sentinel: connect fails with engine, naming the check.
	e, werr = openSentinel(t, b, "rediss://emq:pw@"+nodes[0]+"/2", nodes[:1], caFile)
	if werr == nil || werr.Kind != KindEngine || !strings.Contains(werr.Msg, "does not name the host") {
		if e != nil {
			e.Close()
		}
		t.Fatalf("connect: %v, want kind engine saying the certificate does not name the host", werr)
	}
}

// ---- with a real valkey-server --sentinel (skipped without one, as engine_test.go) ----

// startProc starts server with args and waits for PING through cli with auth.
func startProc(t *testing.T, server string, port int, auth []string, args ...string) {
	t.Helper()
	cmd := exec.Command(server, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	cli := filepath.Join(filepath.Dir(server), "valkey-cli")
	for i := 0; i < 100; i++ {
		out, _ := exec.Command(cli, append(append([]string{"-p", fmt.Sprint(port)}, auth...), "PING")...).Output()
		if strings.TrimSpace(string(out)) == "PONG" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s on %d did not answer PING", server, port)
}

// A primary, a replica and a Sentinel whose connector user holds what R11.4 lists: connect
// through a dead Sentinel and the live one, enqueue; SENTINEL FAILOVER; the next calls follow
// the new primary (a failed call at most, never re-sent), and the Sentinel's ACL LOG stays empty.
func TestEngineBehindRealSentinel(t *testing.T) {
	server := findServer()
	if server == "" {
		t.Skip("no valkey-server ($EMQ_VALKEY_SERVER or on PATH)")
	}
	cliPath := filepath.Join(filepath.Dir(server), "valkey-cli")
	if _, err := os.Stat(cliPath); err != nil {
		t.Skip("no valkey-cli beside " + server)
	}
	cli := func(port int, args ...string) string {
		full := append([]string{"-p", fmt.Sprint(port), "--user", "admin", "--pass", "adm", "--no-auth-warning"}, args...)
		out, _ := exec.Command(cliPath, full...).Output()
		return strings.TrimSpace(string(out))
	}
	admin := []string{"--user", "admin", "--pass", "adm", "--no-auth-warning"}
	users := strings.Fields("--user admin on >adm ~* &* +@all --user emq on >pw ~* +@all -info --user default off")
	pp, rp, sp := freePort(t), freePort(t), freePort(t)
	data := func(port int, more ...string) []string {
		return append(append([]string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", t.TempDir(), "--masteruser", "admin", "--masterauth", "adm"}, users...), more...)
	}
	startProc(t, server, pp, admin, data(pp)...)
	startProc(t, server, rp, admin, data(rp, "--replicaof", "127.0.0.1", fmt.Sprint(pp))...)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	os.WriteFile(conf, []byte(fmt.Sprintf(`port %d
bind 127.0.0.1
dir %s
sentinel monitor emq 127.0.0.1 %d 1
sentinel auth-user emq admin
sentinel auth-pass emq adm
sentinel down-after-milliseconds emq 2000
sentinel failover-timeout emq 4000
user admin on >adm ~* &* +@all
user default off
user emq on >pw -@all +auth +hello +ping +client|setname +client|setinfo +sentinel|get-master-addr-by-name +sentinel|get-primary-addr-by-name +sentinel|sentinels
`, sp, dir, pp)), 0o600)
	startProc(t, server, sp, admin, conf, "--sentinel")

	b := testBundle(t)
	nodes := []string{deadAddr(t), fmt.Sprintf("127.0.0.1:%d", sp)}
	e, werr := openSentinel(t, b, "redis://emq:pw@"+nodes[0]+"/3", nodes, "")
	if werr != nil {
		t.Fatalf("connect: %v", werr)
	}
	defer e.Close()
	if _, werr := e.Enqueue("q", "before", 0); werr != nil {
		t.Fatalf("enqueue: %v", werr)
	}
	// The Sentinel must know the replica before it can fail over to it.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(cli(sp, "SENTINEL", "REPLICAS", "emq"), fmt.Sprint(rp)) {
		if time.Now().After(deadline) {
			t.Fatal("the Sentinel never saw the replica")
		}
		time.Sleep(200 * time.Millisecond)
	}
	for cli(rp, "INFO", "replication") == "" || !strings.Contains(cli(rp, "INFO", "replication"), "master_link_status:up") {
		if time.Now().After(deadline) {
			t.Fatal("the replica never synced")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out := cli(sp, "SENTINEL", "FAILOVER", "emq"); out != "OK" {
		t.Fatalf("SENTINEL FAILOVER: %q", out)
	}
	// Done when the Sentinel names the replica and it says master. The old primary is then turned
	// into its replica here (the Sentinel would do it some seconds later, killing its clients),
	// with the session's connection left open: its next script meets READONLY (R11.3).
	for !strings.Contains(cli(sp, "SENTINEL", "get-master-addr-by-name", "emq"), fmt.Sprint(rp)) ||
		!strings.HasPrefix(cli(rp, "ROLE"), "master") {
		if time.Now().After(deadline) {
			t.Fatal("the failover did not complete")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out := cli(pp, "REPLICAOF", "127.0.0.1", fmt.Sprint(rp)); out != "OK" {
		t.Fatalf("REPLICAOF: %q", out)
	}
	_, werr = e.Enqueue("q", "readonly", 0)
	if werr == nil || werr.Kind != KindEngine || !strings.Contains(werr.Msg, "READONLY") {
		t.Fatalf("enqueue on the demoted primary: %v, want kind engine naming READONLY", werr)
	}
	ok := 0
	for i := 0; i < 3; i++ {
		if _, werr := e.Enqueue("q", fmt.Sprint("after", i), 0); werr != nil {
			t.Fatalf("enqueue %d after the failover: %v", i, werr)
		}
		ok++
	}
	if e.primary != fmt.Sprintf("127.0.0.1:%d", rp) {
		t.Fatalf("primary %s, want port %d", e.primary, rp)
	}
	if clients := cli(pp, "CLIENT", "LIST", "USER", "emq"); clients != "" {
		t.Fatalf("a connection of the session is still open on the old primary: %s", clients)
	}
	if n, werr := e.PendingSize("q"); werr != nil || n != int64(1+ok) {
		t.Fatalf("pending_size %d %v, want %d: a failed call was re-sent or a job was lost", n, werr, 1+ok)
	}
	if log := cli(sp, "ACL", "LOG"); log != "" {
		t.Fatalf("the Sentinel refused a command of the connector (R11.4):\n%s", log)
	}
	if calls := cli(rp, "INFO", "commandstats"); !strings.Contains(calls, "cmdstat_role:") {
		t.Fatalf("no ROLE reached the new primary")
	}
}
