package main

// A database on a cluster (SPEC R8.5) without an engine: every connection a cluster session opens
// to a node (the seed's, a primary's from the slot map, the one a MOVED leads to, an ASK target,
// and the replacements after a lost connection) sends SELECT <db> right after AUTH, before any
// other command; a SELECT the engine refuses fails connect with kind engine and its text, with no
// fence read and no script sent; database 0 sends no SELECT. The nodes are in-process fakes
// (sentinel_test.go's fakeServer) that record every command per connection.

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// fakeCluster is a set of fake primaries sharing one slot map; redirect, when set, answers a
// node's INCR (the node's address and the key) with a redirect reply, or "" to run it.
type fakeCluster struct {
	b        *Bundle
	mu       sync.Mutex
	slots    [][3]interface{} // {start, end, *fakeServer}
	redirect func(node, key string) string
	refuse   map[*fakeServer]string // a node's SELECT is answered with this error reply
}

func (fc *fakeCluster) node(t *testing.T) *fakeServer {
	loaded := map[string]bool{}
	return startFake(t, nil, func(f *fakeServer, args []string) string {
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
				out += fmt.Sprintf("*3\r\n:%d\r\n:%d\r\n*3\r\n%s:%d\r\n%s", r[0], r[1], bulk("127.0.0.1"), n.port(), bulk(n.addr()))
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
