package main

// Engine-backed tests of the seam's promises, run when a valkey-server is at hand
// ($EMQ_VALKEY_SERVER, as ci/provision of the repository writes it to $EMQ_CACHE/env, or one on
// PATH); skipped otherwise. The engine is inspected with valkey-cli, never with the client library
// (only seam.go may import it).

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type testEngine struct {
	port int
	cli  string
	cmd  *exec.Cmd
}

func findServer() string {
	if s := os.Getenv("EMQ_VALKEY_SERVER"); s != "" {
		return s
	}
	for _, n := range []string{"valkey-server", "redis-server"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func startEngine(t *testing.T) *testEngine {
	t.Helper()
	server := findServer()
	if server == "" {
		t.Skip("no valkey-server ($EMQ_VALKEY_SERVER or on PATH)")
	}
	cli := filepath.Join(filepath.Dir(server), "valkey-cli")
	if _, err := os.Stat(cli); err != nil {
		cli = filepath.Join(filepath.Dir(server), "redis-cli")
		if _, err := os.Stat(cli); err != nil {
			t.Skip("no valkey-cli beside " + server)
		}
	}
	e := &testEngine{port: freePort(t), cli: cli}
	e.cmd = exec.Command(server, "--port", fmt.Sprint(e.port), "--bind", "127.0.0.1", "--requirepass", "pw",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.cmd.Process.Kill(); e.cmd.Wait() })
	for i := 0; i < 100; i++ {
		if out, _ := e.try("PING"); out == "PONG" {
			return e
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the engine did not answer PING")
	return nil
}

func (e *testEngine) try(args ...string) (string, error) {
	full := append([]string{"-p", fmt.Sprint(e.port), "-a", "pw", "--no-auth-warning"}, args...)
	out, err := exec.Command(e.cli, full...).Output()
	return strings.TrimSpace(string(out)), err
}

func (e *testEngine) do(t *testing.T, args ...string) string {
	t.Helper()
	out, err := e.try(args...)
	if err != nil {
		t.Fatalf("valkey-cli %v: %v", args, err)
	}
	return out
}

func (e *testEngine) stat(t *testing.T, name string) string {
	for _, line := range strings.Split(e.do(t, "INFO", "commandstats"), "\n") {
		if strings.HasPrefix(line, "cmdstat_"+name+":") {
			return strings.SplitN(strings.SplitN(line, "calls=", 2)[1], ",", 2)[0]
		}
	}
	return "0"
}

func openOn(t *testing.T, port int) *Engine {
	t.Helper()
	tg, werr := ParseTarget(fmt.Sprintf("redis://:pw@127.0.0.1:%d/3", port), false)
	if werr != nil {
		t.Fatal(werr)
	}
	en, werr := Open(testBundle(t), tg, t.Logf)
	if werr != nil {
		t.Fatal(werr)
	}
	t.Cleanup(en.Close)
	return en
}

func TestEngineFenceEvalshaReconnect(t *testing.T) {
	eng := startEngine(t)
	en := openOn(t, eng.port)
	if f := eng.do(t, "-n", "3", "HGET", "emq:fence", "protocol"); f != "1" {
		t.Fatalf("fence not installed: %q", f)
	}
	id, werr := en.Enqueue("q", "hello", 0)
	if werr != nil || id != "j0000000000000001" {
		t.Fatalf("enqueue: %q %v", id, werr)
	}
	if loads := eng.stat(t, "script|load"); loads != "1" {
		t.Fatalf("first enqueue cost %s loads, want 1", loads)
	}
	for i := 0; i < 5; i++ {
		if _, werr := en.Enqueue("q", "x", 0); werr != nil {
			t.Fatal(werr)
		}
	}
	if loads := eng.stat(t, "script|load"); loads != "1" {
		t.Fatalf("cached enqueues cost loads: %s", loads)
	}
	if eval := eng.stat(t, "eval"); eval != "0" {
		t.Fatalf("EVAL was sent %s times", eval)
	}
	eng.do(t, "SCRIPT", "FLUSH")
	if _, werr := en.Enqueue("q", "after flush", 0); werr != nil {
		t.Fatalf("enqueue after SCRIPT FLUSH: %v", werr)
	}
	if loads := eng.stat(t, "script|load"); loads != "2" {
		t.Fatalf("after a flush: %s loads in all, want 2", loads)
	}
	// A WRONGTYPE is an engine error, not a miss: no load.
	eng.do(t, "-n", "3", "SET", "emq:{w}:pending", "x")
	if _, werr := en.Enqueue("w", "p", 0); werr == nil || werr.Kind != KindEngine {
		t.Fatalf("WRONGTYPE: %v", werr)
	}
	if loads := eng.stat(t, "script|load"); loads != "2" {
		t.Fatalf("WRONGTYPE cost a load")
	}

	// A killed connection: the call fails with kind engine, and the next verb reconnects and
	// reads the fence first (here a protocol-2 fence, so it is refused with kind fence).
	eng.do(t, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
	if _, werr := en.PendingSize("q"); werr == nil || werr.Kind != KindEngine {
		t.Fatalf("after CLIENT KILL: %v", werr)
	}
	eng.do(t, "-n", "3", "HSET", "emq:fence", "protocol", "2")
	if _, werr := en.PendingSize("q"); werr == nil || werr.Kind != KindFence {
		t.Fatalf("reconnect did not read the fence: %v", werr)
	}
	eng.do(t, "-n", "3", "HSET", "emq:fence", "protocol", "1")
	if n, werr := en.PendingSize("q"); werr != nil || n != 7 {
		t.Fatalf("pending_size after reconnect: %d %v", n, werr)
	}
}

func TestEngineBatchAndProbe(t *testing.T) {
	eng := startEngine(t)
	en := openOn(t, eng.port)
	n, werr := en.Batch([]string{"a", "b", "c"}, 10000, 500, "p")
	if werr != nil || n != 10000 {
		t.Fatalf("batch: %d %v", n, werr)
	}
	for q, want := range map[string]string{"a": "3334", "b": "3333", "c": "3333"} {
		if got := eng.do(t, "-n", "3", "ZCARD", "emq:{"+q+"}:pending"); got != want {
			t.Errorf("queue %s holds %s, want %s", q, got, want)
		}
	}
	got, werr := en.Probe("probe", 1000)
	if werr != nil || len(got) != 1000 || got[0] != 1 || got[999] != 1000 {
		t.Fatalf("probe: %v", werr)
	}
	jobs, werr := en.Browse("a", 1, 2)
	if werr != nil || len(jobs) != 2 || jobs[0].ID != "j0000000000000002" || jobs[1].Payload != "p" {
		t.Fatalf("browse: %+v %v", jobs, werr)
	}
}

// lossyProxy forwards one client connection to the engine and, once armed, closes both sides as
// soon as the engine's reply to a command containing marker has been read (a lost reply: the
// script ran, the client never sees it).
type lossyProxy struct {
	ln     net.Listener
	target string
	marker []byte
	mu     sync.Mutex
	armed  bool
}

func (p *lossyProxy) arm() { p.mu.Lock(); p.armed = true; p.mu.Unlock() }

func (p *lossyProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

func (p *lossyProxy) pipe(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	var mute sync.Mutex // held while deciding; muted: nothing more reaches the client
	muted := false
	go func() { // client -> server
		defer c.Close()
		defer s.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				p.mu.Lock()
				hit := p.armed && bytes.Contains(buf[:n], p.marker)
				if hit {
					p.armed = false
				}
				p.mu.Unlock()
				if hit {
					mute.Lock()
					muted = true
					mute.Unlock()
				}
				s.Write(buf[:n])
				if hit {
					time.Sleep(100 * time.Millisecond) // the engine runs it and replies; the reply is dropped
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { // server -> client, until muted
		buf := make([]byte, 64<<10)
		for {
			n, err := s.Read(buf)
			mute.Lock()
			m := muted
			mute.Unlock()
			if n > 0 && !m {
				c.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
}

func TestEngineLostReplyIsEngineAndNotResent(t *testing.T) {
	eng := startEngine(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := &lossyProxy{ln: ln, target: fmt.Sprintf("127.0.0.1:%d", eng.port), marker: []byte("lost-reply-token")}
	go p.serve()
	en := openOn(t, ln.Addr().(*net.TCPAddr).Port)
	if _, werr := en.Enqueue("q", "warm-up", 0); werr != nil { // loads the script
		t.Fatal(werr)
	}
	p.arm()
	id, werr := en.Enqueue("q", "lost-reply-token", 0)
	if werr == nil || werr.Kind != KindEngine {
		t.Fatalf("a lost reply answered %q, %v; want kind engine", id, werr)
	}
	// The script ran once and was not re-sent.
	if got := eng.do(t, "-n", "3", "ZCARD", "emq:{q}:pending"); got != "2" {
		t.Fatalf("pending holds %s jobs, want 2 (warm-up + the lost-reply enqueue, once)", got)
	}
	// The session reconnects at its next verb (through the proxy, fence first) and goes on.
	if n, werr := en.PendingSize("q"); werr != nil || n != 2 {
		t.Fatalf("after the lost reply: %d %v", n, werr)
	}
}

// A connect without "cluster": true that meets a MOVED reports it as kind engine at once and
// follows nothing (R8.1, R5.4). A fake engine answers every command with a MOVED.
func TestSingleEngineDoesNotFollowMoved(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	commands := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						k := bytes.Count(buf[:n], []byte("*")) // one array header per command here
						mu.Lock()
						commands += k
						mu.Unlock()
						for i := 0; i < k; i++ {
							c.Write([]byte("-MOVED 4709 127.0.0.1:1\r\n"))
						}
					}
					if err != nil {
						return
					}
				}
			}(c)
		}
	}()
	tg, werr := ParseTarget("redis://"+ln.Addr().String()+"/0", false)
	if werr != nil {
		t.Fatal(werr)
	}
	_, werr = Open(testBundle(t), tg, t.Logf)
	if werr == nil || werr.Kind != KindEngine || !strings.Contains(werr.Msg, "MOVED") {
		t.Fatalf("connect: %v, want kind engine naming the MOVED", werr)
	}
	mu.Lock()
	defer mu.Unlock()
	if commands != 1 {
		t.Fatalf("the connector sent %d commands, want 1 (the fence read, not followed)", commands)
	}
}
