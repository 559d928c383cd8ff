package main

// A database on a cluster (SPEC R8.5) without an engine: every connection a cluster session opens
// to a node (the seed's, a primary's from the slot map, the one a MOVED leads to, an ASK target,
// and the replacements after a lost connection) sends SELECT <db> right after AUTH, before any
// other command; a SELECT the engine refuses fails connect with kind engine and its text, with no
// fence read and no script sent; database 0 sends no SELECT. The nodes are in-process fakes
// (sentinel_test.go's fakeServer) that record every command per connection.

import (
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeCluster is a set of fake primaries sharing one slot map; redirect, when set, answers a
// node's INCR (the node's address and the key) with a redirect reply, or "" to run it.
type fakeCluster struct {
	b        *Bundle
	mu       sync.Mutex
	slots    [][3]interface{} // {start, end, *fakeServer}
	redirect func(node, key string) string
	refuse   map[*fakeServer]string // a node's SELECT is answered with this error reply
	announce map[*fakeServer]string // the host CLUSTER SLOTS gives a node ("null": a null); default its own
}

func (fc *fakeCluster) node(t *testing.T) *fakeServer {
	return fc.nodeOn(t, nil, nil)
}

// nodeOn is a node on ln (nil: 127.0.0.1, any port), speaking TLS with cfg when it is not nil.
func (fc *fakeCluster) nodeOn(t *testing.T, ln net.Listener, cfg *tls.Config) *fakeServer {
	t.Helper()
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	loaded := map[string]bool{}
	return startFakeOn(t, ln, cfg, func(f *fakeServer, args []string) string {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		switch strings.ToUpper(args[0]) {
		case "AUTH", "ASKING":
			return "+OK\r\n"
		case "SELECT":
			if why := fc.refuse[f]; why != "" {
				return "-" + why + "\r\n"
			}
			return "+OK\r\n"
		case "CLUSTER":
			out := fmt.Sprintf("*%d\r\n", len(fc.slots))
			for _, r := range fc.slots {
				n := r[2].(*fakeServer)
				host := bulk(n.host())
				if h, ok := fc.announce[n]; ok && h == "null" {
					host = "$-1\r\n"
				} else if ok {
					host = bulk(h)
				}
				out += fmt.Sprintf("*3\r\n:%d\r\n:%d\r\n*3\r\n%s:%d\r\n%s", r[0], r[1], host, n.port(), bulk(n.addr()))
			}
			return out
		case "HGETALL":
			return fmt.Sprintf("*6\r\n%s%s%s%s%s%s", bulk("protocol"), bulk(fc.b.Protocol), bulk("bundle"),
				bulk(fc.b.Version), bulk("digest"), bulk(fc.b.Digest))
		case "INCR":
			if fc.redirect != nil {
				if r := fc.redirect(f.addr(), args[1]); r != "" {
					return "-" + r + "\r\n"
				}
			}
			return ":1\r\n"
		case "SCRIPT":
			sum := sha1.Sum([]byte(args[2]))
			sha := hex.EncodeToString(sum[:])
			loaded[sha] = true
			return bulk(sha)
		case "EVALSHA":
			if !loaded[args[1]] {
				return "-NOSCRIPT No matching script.\r\n"
			}
			return bulk("j0000000000000001")
		}
		return "-ERR unexpected " + args[0] + "\r\n"
	})
}

func (fc *fakeCluster) set(f func()) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	f()
}

func openCluster(t *testing.T, b *Bundle, url string) (*Engine, *WireError) {
	t.Helper()
	tg, err := ParseTarget(url, true)
	if err != nil {
		t.Fatal(err)
	}
	return Open(b, tg, t.Logf)
}

// checkSelectFirst fails unless every connection n received begins with AUTH emq pw, SELECT <db>.
func checkSelectFirst(t *testing.T, name string, n *fakeServer, db string, atLeast int) {
	t.Helper()
	cs, _ := n.seen()
	if len(cs) < atLeast {
		t.Errorf("node %s: %d connections, want at least %d", name, len(cs), atLeast)
	}
	for i, c := range cs {
		if len(c) < 2 || c[0] != "AUTH emq pw" || c[1] != "SELECT "+db {
			t.Errorf("node %s connection %d got %q: want AUTH, then SELECT %s before anything else", name, i, c, db)
		}
	}
}

// The database on every node connection (R8.5): seed, slot map, MOVED, ASK, replacement.
func TestClusterSelectsTheDatabaseOnEveryNodeConnection(t *testing.T) {
	b := testBundle(t)
	fc := &fakeCluster{b: b}
	a, bn, c, d := fc.node(t), fc.node(t), fc.node(t), fc.node(t)
	fc.slots = [][3]interface{}{{0, 8191, a}, {8192, 16383, bn}}

	// The seed (a) and the slot map's other primary (b), opened at connect.
	e, werr := openCluster(t, b, "redis://emq:pw@"+a.addr()+"/9")
	if werr != nil {
		t.Fatalf("connect: %v", werr)
	}
	defer e.Close()
	if e.t.DB != 9 || !e.t.Cluster {
		t.Fatalf("target %+v: want database 9 on a cluster", e.t)
	}
	if _, werr := e.Enqueue("q", "x", 0); werr != nil {
		t.Fatalf("enqueue: %v", werr)
	}
	if _, werr := e.Probe("k", 2); werr != nil {
		t.Fatalf("probe: %v", werr)
	}

	// MOVED: every slot moved to c, which no connection of the session knew yet.
	fc.set(func() {
		fc.slots = [][3]interface{}{{0, 16383, c}}
		fc.redirect = func(node, key string) string {
			switch node {
			case d.addr(): // the ASK target serves the call it was asked
				return ""
			case a.addr(), bn.addr():
				return "MOVED 0 " + c.addr()
			}
			if key == "asked" {
				return "ASK 0 " + d.addr() // ASK: d, for this one call, the map unchanged
			}
			return ""
		}
	})
	if _, werr := e.Probe("k", 2); werr != nil {
		t.Fatalf("probe after MOVED: %v", werr)
	}
	if _, werr := e.Probe("asked", 1); werr != nil {
		t.Fatalf("probe after ASK: %v", werr)
	}
	if cs, _ := d.seen(); len(cs) != 1 || strings.Join(cs[0], "|") != "AUTH emq pw|SELECT 9|ASKING|INCR asked" {
		t.Fatalf("ASK target got %q: want AUTH, SELECT 9, ASKING, INCR", cs)
	}

	// A lost connection: the call fails (engine, not re-sent); the next verb opens new ones.
	c.mu.Lock()
	for _, conn := range c.open {
		conn.Close()
	}
	c.mu.Unlock()
	if _, werr := e.Probe("k", 1); werr == nil || werr.Kind != KindEngine {
		t.Fatalf("probe on a lost connection: %v, want kind engine", werr)
	}
	if _, werr := e.Probe("k", 1); werr != nil {
		t.Fatalf("probe after the reconnect: %v", werr)
	}

	checkSelectFirst(t, "a (seed, then the reconnect's slot map)", a, "9", 2)
	checkSelectFirst(t, "b (slot map)", bn, "9", 1)
	checkSelectFirst(t, "c (MOVED, then its replacement)", c, "9", 2)
	checkSelectFirst(t, "d (ASK)", d, "9", 1)
}

// A SELECT the engine refuses, on the seed or on another primary, fails connect with kind engine
// and the engine's text; no fence is read and no script sent (R8.5). The client refuses none.
func TestClusterRefusedSelectIsEngine(t *testing.T) {
	b := testBundle(t)
	refusals := []string{
		"ERR DB index is out of range",
		"ERR SELECT is not allowed in cluster mode",
		"NOPERM No permissions to access database",
	}
	for _, why := range refusals {
		for _, onSeed := range []bool{true, false} {
			fc := &fakeCluster{b: b}
			a, bn := fc.node(t), fc.node(t)
			fc.slots = [][3]interface{}{{0, 8191, a}, {8192, 16383, bn}}
			if onSeed {
				fc.refuse = map[*fakeServer]string{a: why}
			} else {
				fc.refuse = map[*fakeServer]string{bn: why} // the seed selects, the other primary refuses
			}
			s := NewServer(b)
			m := reply(t, s, `{"seq":1,"cmd":"connect","session":"w","url":"redis://emq:pw@`+a.addr()+`/16","cluster":true}`)
			msg, _ := m["error"].(map[string]interface{})["message"].(string)
			if k := errKind(m); k != KindEngine || !strings.Contains(msg, why) {
				t.Errorf("%s (seed refuses: %v): %v, want kind engine with the engine's text", why, onSeed, m)
			}
			for _, n := range []*fakeServer{a, bn} {
				cs, _ := n.seen()
				for _, conn := range cs {
					for _, cmd := range conn {
						if w := strings.Fields(cmd)[0]; w == "HGETALL" || w == "EVALSHA" || w == "SCRIPT" {
							t.Errorf("%s (seed refuses: %v): %s was sent after a refused SELECT", why, onSeed, cmd)
						}
					}
				}
			}
		}
	}
}

// Database 0, named or not, sends no SELECT on a cluster (as before R8.5).
func TestClusterDatabaseZeroSendsNoSelect(t *testing.T) {
	b := testBundle(t)
	for _, suffix := range []string{"", "/", "/0"} {
		fc := &fakeCluster{b: b}
		a := fc.node(t)
		fc.slots = [][3]interface{}{{0, 16383, a}}
		e, werr := openCluster(t, b, "redis://emq:pw@"+a.addr()+suffix)
		if werr != nil {
			t.Fatalf("connect %q: %v", suffix, werr)
		}
		if _, werr := e.Probe("k", 1); werr != nil {
			t.Fatalf("probe: %v", werr)
		}
		e.Close()
		cs, _ := a.seen()
		if len(cs) != 1 || len(cs[0]) < 2 || cs[0][0] != "AUTH emq pw" || cs[0][1] != "CLUSTER SLOTS" {
			t.Fatalf("url %q: the seed got %q, want AUTH then CLUSTER SLOTS (no SELECT)", suffix, cs)
		}
	}
}

// ---- an unknown endpoint (R8.13) ----

// The address of a node a reply names without a host is the answering node's host at the port
// given; a named host is kept.
func TestNodeAddrWithoutHostIsTheAnsweringNodesHost(t *testing.T) {
	cases := []struct{ named, from, want string }{
		{":7001", "127.0.0.2:7000", "127.0.0.2:7001"},
		{":7001", "node-a.example:7000", "node-a.example:7001"},
		{":7001", "[::1]:7000", "[::1]:7001"},
		{"?:7001", "node-a.example:7000", "node-a.example:7001"},
		{"10.0.0.5:7001", "127.0.0.2:7000", "10.0.0.5:7001"},
		{"node-b.example:7001", "127.0.0.2:7000", "node-b.example:7001"},
	}
	for _, c := range cases {
		if got := redirAddr(c.named, c.from); got != c.want {
			t.Errorf("redirAddr(%q, from %q) = %q, want %q", c.named, c.from, got, c.want)
		}
	}
	if got := nodeAddr("", "7001", "localhost:7000"); got != "localhost:7001" {
		t.Errorf("nodeAddr(\"\", 7001, from localhost:7000) = %q, want localhost:7001", got)
	}
}

// listenPair listens on 127.0.0.2 and on 127.0.0.1 at one port: a node on another host than the
// seed's, and a trap where a dial of ":port" lands (Go's net.Dial takes an empty host for the
// local system, net/dial.go:314-317: 127.0.0.1 here) and where the seed url's host would lead.
// Skipped where 127.0.0.2 is not a loopback address.
func listenPair(t *testing.T) (node, trap net.Listener) {
	t.Helper()
	for i := 0; i < 20; i++ {
		n, err := net.Listen("tcp", "127.0.0.2:0")
		if err != nil {
			t.Skipf("no second loopback address (127.0.0.2): %v", err)
		}
		tr, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(n.Addr().(*net.TCPAddr).Port)))
		if err == nil {
			return n, tr
		}
		n.Close()
	}
	t.Fatal("no port free on both 127.0.0.1 and 127.0.0.2")
	return nil, nil
}

// checkNoConnection fails if a trap received a connection: the connector dialled the local system
// or the seed's host for a node that is elsewhere (right only by accident, R8.13).
func checkNoConnection(t *testing.T, traps ...*fakeServer) {
	t.Helper()
	for _, tr := range traps {
		if cs, _ := tr.seen(); len(cs) != 0 {
			t.Errorf("%s (the local system, not the answering node's host) got connections %q", tr.addr(), cs)
		}
	}
}

// checkConnKeys fails unless every connection of the session is to a host:port with a host.
func checkConnKeys(t *testing.T, e *Engine, want ...string) {
	t.Helper()
	for addr := range e.conns {
		if h, _, err := net.SplitHostPort(addr); err != nil || h == "" || h == "?" {
			t.Errorf("the session holds a connection to %q: no host", addr)
		}
	}
	for _, w := range want {
		if _, ok := e.conns[w]; !ok {
			t.Errorf("the session holds no connection to %s (it holds %v)", w, keysOfConns(e))
		}
	}
}

func keysOfConns(e *Engine) []string {
	var out []string
	for a := range e.conns {
		out = append(out, a)
	}
	return out
}

// A MOVED or ASK that names no host ("MOVED 12 :7001", cluster-preferred-endpoint-type
// unknown-endpoint) is followed to the host of the node that sent it, at the port given (R8.13):
// the seed is on 127.0.0.1 and serves no slot, every slot is b's on 127.0.0.2, and b sends the
// call to c (MOVED) and d (ASK), on 127.0.0.2 too. A node on 127.0.0.1 at c's and at d's port,
// where ":port" lands, must get no connection; the redirect is not the call's error.
func TestClusterRedirectWithoutHostGoesToTheAnsweringNodesHost(t *testing.T) {
	b := testBundle(t)
	fc := &fakeCluster{b: b}
	seed := fc.node(t)
	bl, btrap := listenPair(t)
	cl, ctrap := listenPair(t)
	dl, dtrap := listenPair(t)
	bn, c, d := fc.nodeOn(t, bl, nil), fc.nodeOn(t, cl, nil), fc.nodeOn(t, dl, nil)
	traps := []*fakeServer{fc.nodeOn(t, btrap, nil), fc.nodeOn(t, ctrap, nil), fc.nodeOn(t, dtrap, nil)}
	fc.slots = [][3]interface{}{{0, 16383, bn}}

	e, werr := openCluster(t, b, "redis://emq:pw@"+seed.addr()+"/9")
	if werr != nil {
		t.Fatalf("connect: %v", werr)
	}
	defer e.Close()
	fc.set(func() {
		fc.redirect = func(node, key string) string {
			if node != bn.addr() {
				return "" // c and d run what they are sent
			}
			switch key {
			case "moved":
				return fmt.Sprintf("MOVED %d :%d", keySlot(key), c.port())
			case "asked":
				return fmt.Sprintf("ASK %d :%d", keySlot(key), d.port())
			}
			return ""
		}
	})

	if _, werr := e.Probe("moved", 1); werr != nil {
		t.Fatalf("probe answered MOVED %d :%d: %v, want it followed to %s", keySlot("moved"), c.port(), werr, c.addr())
	}
	if got := e.slots[keySlot("moved")]; got != c.addr() {
		t.Errorf("after MOVED :%d from %s the slot is %q's, want %s", c.port(), bn.addr(), got, c.addr())
	}
	if cs, _ := c.seen(); len(cs) != 1 || strings.Join(cs[0], "|") != "AUTH emq pw|SELECT 9|INCR moved" {
		t.Errorf("the MOVED target %s got %q: want AUTH, SELECT 9, INCR moved", c.addr(), cs)
	}
	if _, werr := e.Probe("asked", 1); werr != nil {
		t.Fatalf("probe answered ASK %d :%d: %v, want it followed to %s", keySlot("asked"), d.port(), werr, d.addr())
	}
	if cs, _ := d.seen(); len(cs) != 1 || strings.Join(cs[0], "|") != "AUTH emq pw|SELECT 9|ASKING|INCR asked" {
		t.Errorf("the ASK target %s got %q: want AUTH, SELECT 9, ASKING, INCR asked", d.addr(), cs)
	}
	// The MOVED target keeps the slot; the next call goes there directly.
	if _, werr := e.Probe("moved", 1); werr != nil {
		t.Fatalf("probe after the MOVED: %v", werr)
	}
	checkConnKeys(t, e, bn.addr(), c.addr(), d.addr())
	checkNoConnection(t, traps...)
}

// slotsAround gives slot s to one node and every other slot to another.
func slotsAround(s int, one, rest *fakeServer) [][3]interface{} {
	var out [][3]interface{}
	if s > 0 {
		out = append(out, [3]interface{}{0, s - 1, rest})
	}
	out = append(out, [3]interface{}{s, s, one})
	if s < 16383 {
		out = append(out, [3]interface{}{s + 1, 16383, rest})
	}
	return out
}

// CLUSTER SLOTS naming a node's host as null or "" (unknown-endpoint) names the host of the node
// that answered, not the seed url's (R8.13), whether the map is read again after a MOVED or at a
// reconnect past a dead seed. The seed is on 127.0.0.1 and serves no slot; b and c are on
// 127.0.0.2; a node on 127.0.0.1 at b's and at c's port, where the seed's host would lead, must
// get no connection.
func TestClusterSlotsWithoutHostTakeTheAnsweringNodesHost(t *testing.T) {
	b := testBundle(t)
	fc := &fakeCluster{b: b}
	seed := fc.node(t)
	bl, btrap := listenPair(t)
	cl, ctrap := listenPair(t)
	bn, c := fc.nodeOn(t, bl, nil), fc.nodeOn(t, cl, nil)
	traps := []*fakeServer{fc.nodeOn(t, btrap, nil), fc.nodeOn(t, ctrap, nil)}
	fc.slots = [][3]interface{}{{0, 16383, bn}} // the seed names b by its address

	e, werr := openCluster(t, b, "redis://emq:pw@"+seed.addr()+"/9")
	if werr != nil {
		t.Fatalf("connect: %v", werr)
	}
	defer e.Close()
	if len(e.conns) != 1 || e.conns[bn.addr()] == nil {
		t.Fatalf("after connect the session holds %v, want b (%s) only", keysOfConns(e), bn.addr())
	}

	// The map changes and b, the only node the session holds a connection to, answers it: c as ""
	// and b itself as null. A MOVED (naming c by its address) makes the session read it.
	s := keySlot("moved")
	other := "k"
	if keySlot(other) == s {
		t.Fatalf("keys %q and %q share slot %d", "moved", other, s)
	}
	fc.set(func() {
		fc.slots = slotsAround(s, c, bn)
		fc.announce = map[*fakeServer]string{c: "", bn: "null"}
		fc.redirect = func(node, key string) string {
			if node == bn.addr() && key == "moved" {
				return fmt.Sprintf("MOVED %d %s", s, c.addr())
			}
			return ""
		}
	})
	check := func(when string) {
		t.Helper()
		for slot, addr := range e.slots {
			want := bn.addr()
			if slot == s {
				want = c.addr()
			}
			if addr != want {
				t.Fatalf("%s: slot %d is %q's, want %s (the answering node's host, 127.0.0.2)", when, slot, addr, want)
			}
		}
		if _, werr := e.Probe("moved", 1); werr != nil {
			t.Fatalf("%s: probe on c's slot: %v", when, werr)
		}
		if _, werr := e.Probe(other, 1); werr != nil {
			t.Fatalf("%s: probe on b's slot: %v", when, werr)
		}
		checkConnKeys(t, e, bn.addr(), c.addr())
	}
	if _, werr := e.Probe("moved", 1); werr != nil {
		t.Fatalf("probe answered MOVED: %v", werr)
	}
	check("the map read again after MOVED, answered by b")

	// A reconnect past a dead seed: every connection is lost, the seed refuses, b answers the map
	// (now b as "" and c as null), and the session goes on at 127.0.0.2.
	fc.set(func() {
		fc.announce = map[*fakeServer]string{c: "null", bn: ""}
		fc.redirect = nil
	})
	seed.stop()
	for _, n := range []*fakeServer{bn, c} {
		n.mu.Lock()
		for _, conn := range n.open {
			conn.Close()
		}
		n.mu.Unlock()
	}
	if _, werr := e.Probe(other, 1); werr == nil || werr.Kind != KindEngine {
		t.Fatalf("probe on a lost connection: %v, want kind engine", werr)
	}
	if !e.broken {
		t.Fatal("the session is not marked for a reconnect after a lost connection")
	}
	if werr := e.ready(); werr != nil {
		t.Fatalf("reconnect past the dead seed (b answers the map): %v", werr)
	}
	check("the reconnect's map, answered by b")
	checkNoConnection(t, traps...)
}

// Over TLS (R8.13, R10.4): a node without a host in CLUSTER SLOTS and a MOVED or ASK without a
// host get the answering node's host name, the url's "localhost" here, and each is dialled over
// TLS and checked against that name (with no host there is no name to check).
func TestClusterRedirectWithoutHostOverTLS(t *testing.T) {
	b := testBundle(t)
	ca := newCA(t, "cluster CA")
	caFile := writeFile(t, "ca.pem", ca.pem)
	now := time.Now()
	cfg := &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, "localhost", now.Add(-time.Hour), now.Add(time.Hour))}}
	fc := &fakeCluster{b: b}
	a, c, d := fc.nodeOn(t, nil, cfg), fc.nodeOn(t, nil, cfg), fc.nodeOn(t, nil, cfg)
	fc.slots = [][3]interface{}{{0, 16383, a}}
	fc.announce = map[*fakeServer]string{a: "null"}
	fc.redirect = func(node, key string) string {
		if node != a.addr() {
			return ""
		}
		switch key {
		case "moved":
			return fmt.Sprintf("MOVED %d :%d", keySlot(key), c.port())
		case "asked":
			return fmt.Sprintf("ASK %d :%d", keySlot(key), d.port())
		}
		return ""
	}

	tg, err := ParseTarget(fmt.Sprintf("rediss://emq:pw@localhost:%d", a.port()), true)
	if err != nil {
		t.Fatal(err)
	}
	if werr := tg.LoadCAFile(caFile); werr != nil {
		t.Fatal(werr)
	}
	e, werr := Open(b, tg, t.Logf)
	if werr != nil {
		t.Fatalf("connect: %v", werr)
	}
	defer e.Close()
	if _, werr := e.Probe("moved", 1); werr != nil {
		t.Fatalf("probe answered MOVED :%d: %v", c.port(), werr)
	}
	if _, werr := e.Probe("asked", 1); werr != nil {
		t.Fatalf("probe answered ASK :%d: %v", d.port(), werr)
	}
	name := func(n *fakeServer) string { return "localhost:" + strconv.Itoa(n.port()) }
	checkConnKeys(t, e, name(a), name(c), name(d))
	for _, n := range []*fakeServer{a, c, d} {
		cs, _ := n.seen()
		n.mu.Lock()
		first := append([]byte{}, n.first...)
		n.mu.Unlock()
		if len(cs) != 1 || len(first) != 1 || first[0] != 0x16 {
			t.Errorf("%s: connections %q, first bytes %x: want one, over TLS", name(n), cs, first)
		}
	}
	if cs, _ := c.seen(); len(cs) == 1 && strings.Join(cs[0], "|") != "AUTH emq pw|INCR moved" {
		t.Errorf("the MOVED target got %q", cs)
	}
	if cs, _ := d.seen(); len(cs) == 1 && strings.Join(cs[0], "|") != "AUTH emq pw|ASKING|INCR asked" {
		t.Errorf("the ASK target got %q", cs)
	}
}
