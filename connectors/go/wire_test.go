package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testBundle(t *testing.T) *Bundle {
	t.Helper()
	b, err := LoadBundle(filepath.Join("..", "..", "bundle"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reply runs one line through a server without engine and decodes the response.
func reply(t *testing.T, s *Server, line string) map[string]interface{} {
	t.Helper()
	out, stop := s.Handle([]byte(line))
	if stop {
		t.Fatalf("%s: unexpected stop", line)
	}
	if !bytes.HasSuffix(out, []byte("\n")) || bytes.Count(out, []byte("\n")) != 1 {
		t.Fatalf("%s: response is not one line: %q", line, out)
	}
	var m map[string]interface{}
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("%s: response %q is not JSON: %v", line, out, err)
	}
	return m
}

func errKind(m map[string]interface{}) string {
	e, ok := m["error"].(map[string]interface{})
	if !ok {
		return ""
	}
	return e["kind"].(string)
}

func TestHello(t *testing.T) {
	s := NewServer(testBundle(t))
	m := reply(t, s, `{"seq": 1, "cmd": "hello", "protocol": 1}`)
	ok := m["ok"].(map[string]interface{})
	if m["seq"].(float64) != 1 || ok["bundle"] != "1.0.0" || ok["language"] != "go" {
		t.Fatalf("hello: %v", m)
	}
	scripts := ok["scripts"].(map[string]interface{})
	if scripts["claim"] != "2319de1e94e21dd355032c7a25b90636b53f36cd" || len(scripts) != 6 {
		t.Fatalf("hello scripts: %v", scripts)
	}
	for _, p := range []string{"2", "0", `"1"`, "1.0", "true", "-1", "[1]"} {
		if k := errKind(reply(t, s, `{"seq": 2, "cmd": "hello", "protocol": `+p+`}`)); k != KindUnsupported {
			t.Errorf("hello protocol %s: kind %q, want unsupported", p, k)
		}
	}
}

func TestStopAndUnknown(t *testing.T) {
	s := NewServer(testBundle(t))
	if out, stop := s.Handle([]byte(`{"seq": 9, "cmd": "stop"}`)); !stop || out != nil {
		t.Fatalf("stop answered %q", out)
	}
	if k := errKind(reply(t, s, `{"seq": 3, "cmd": "frobnicate"}`)); k != KindUnsupported {
		t.Fatalf("unknown cmd: kind %q", k)
	}
	m := reply(t, s, `not json`)
	if m["seq"] != nil || errKind(m) != KindInvalid {
		t.Fatalf("garbage: %v", m)
	}
	m = reply(t, s, `{"seq": 4}`)
	if m["seq"].(float64) != 4 || errKind(m) != KindInvalid {
		t.Fatalf("no cmd: %v", m)
	}
}

func TestServeLoop(t *testing.T) {
	s := NewServer(testBundle(t))
	in := strings.NewReader("{\"seq\":1,\"cmd\":\"hello\",\"protocol\":1}\n\n{\"seq\":2,\"cmd\":\"claim\",\"session\":\"x\",\"queue\":\"q\",\"lease_ms\":1}\n{\"seq\":3,\"cmd\":\"stop\"}\n{\"seq\":4,\"cmd\":\"hello\",\"protocol\":1}\n")
	var out bytes.Buffer
	s.Serve(in, &out)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], `{"seq":1,"ok":`) || !strings.HasPrefix(lines[1], `{"seq":2,"error":`) {
		t.Fatalf("serve: %q", out.String())
	}
}

// Every one of these must be refused with kind invalid before any engine is touched: the server
// has no session at all, and a connect with a bad url must fail before dialing.
func TestValidation(t *testing.T) {
	s := NewServer(testBundle(t))
	cases := []string{
		`{"seq":1,"cmd":"claim","session":"w","queue":"q","lease_ms":-1}`,
		`{"seq":1,"cmd":"claim","session":"w","queue":"q","lease_ms":1000000000001}`,
		`{"seq":1,"cmd":"claim","session":"w","queue":"q","lease_ms":"5"}`,
		`{"seq":1,"cmd":"claim","session":"w","queue":"q","lease_ms":1.5}`,
		`{"seq":1,"cmd":"claim","session":"w","queue":"q","lease_ms":5.0}`,
		`{"seq":1,"cmd":"claim","session":"w","queue":"q","lease_ms":1e3}`,
		`{"seq":1,"cmd":"claim","session":"w","queue":"q","lease_ms":true}`,
		`{"seq":1,"cmd":"claim","session":"w","queue":"q","lease_ms":null}`,
		`{"seq":1,"cmd":"claim","session":"w","queue":"q","lease_ms":99999999999999999999999}`,
		`{"seq":1,"cmd":"claim","session":"w","queue":"q"}`,
		`{"seq":1,"cmd":"claim","session":"w","queue":"bad queue","lease_ms":1}`,
		`{"seq":1,"cmd":"claim","session":"w","queue":"","lease_ms":1}`,
		`{"seq":1,"cmd":"claim","session":"w","queue":"` + strings.Repeat("a", 129) + `","lease_ms":1}`,
		`{"seq":1,"cmd":"claim","session":"w","queue":"q{x}","lease_ms":1}`,
		`{"seq":1,"cmd":"claim","session":"","queue":"q","lease_ms":1}`,
		`{"seq":1,"cmd":"claim","session":7,"queue":"q","lease_ms":1}`,
		`{"seq":1,"cmd":"claim","session":"nobody","queue":"q","lease_ms":1}`,
		`{"seq":1,"cmd":"enqueue","session":"w","queue":"q","payload":"p","delay_ms":-5}`,
		`{"seq":1,"cmd":"enqueue","session":"w","queue":"q","payload":5,"delay_ms":0}`,
		`{"seq":1,"cmd":"enqueue","session":"w","queue":"q","delay_ms":0}`,
		`{"seq":1,"cmd":"complete","session":"w","queue":"q","id":"j1","attempts":1}`,
		`{"seq":1,"cmd":"complete","session":"w","queue":"q","id":"j000000000000000a","attempts":1}`,
		`{"seq":1,"cmd":"complete","session":"w","queue":"q","id":"j0000000000000001\n","attempts":1}`,
		`{"seq":1,"cmd":"complete","session":"w","queue":"q","id":" j0000000000000001","attempts":1}`,
		`{"seq":1,"cmd":"complete","session":"w","queue":"q","id":"j000000000000000١","attempts":1}`,
		`{"seq":1,"cmd":"complete","session":"w","queue":"q","id":"J0000000000000001","attempts":1}`,
		`{"seq":1,"cmd":"enqueue","session":"w","queue":"q\n","payload":"p","delay_ms":0}`,
		`{"seq":1,"cmd":"complete","session":"w","queue":"q","id":"j0000000000000001","attempts":2147483648}`,
		`{"seq":1,"cmd":"complete","session":"w","queue":"q","id":"j0000000000000001","attempts":-1}`,
		`{"seq":1,"cmd":"retry","session":"w","queue":"q","id":"j0000000000000001","attempts":1,"backoff_ms":0,"max_attempts":0}`,
		`{"seq":1,"cmd":"retry","session":"w","queue":"q","id":"j0000000000000001","attempts":1,"backoff_ms":-1,"max_attempts":1}`,
		`{"seq":1,"cmd":"promote","session":"w","queue":"q","limit":-1}`,
		`{"seq":1,"cmd":"promote","session":"w","queue":"q","limit":2147483648}`,
		`{"seq":1,"cmd":"reap","session":"w","queue":"q","max_attempts":0,"limit":1}`,
		`{"seq":1,"cmd":"browse","session":"w","queue":"q","offset":-1,"limit":1}`,
		`{"seq":1,"cmd":"browse","session":"w","queue":"q","offset":0,"limit":0}`,
		`{"seq":1,"cmd":"pipeline_probe","session":"w","key":"emq:x","n":1}`,
		`{"seq":1,"cmd":"pipeline_probe","session":"w","key":"","n":1}`,
		`{"seq":1,"cmd":"pipeline_probe","session":"w","key":"k","n":0}`,
		`{"seq":1,"cmd":"pipeline_probe","session":"w","key":"k","n":1000001}`,
		`{"seq":1,"cmd":"batch","session":"w","queue":"q","n":0,"depth":1,"payload":"x"}`,
		`{"seq":1,"cmd":"batch","session":"w","queue":"q","n":10000001,"depth":1,"payload":"x"}`,
		`{"seq":1,"cmd":"batch","session":"w","queue":"q","n":1,"depth":100001,"payload":"x"}`,
		`{"seq":1,"cmd":"batch","session":"w","queue":"q","n":1,"depth":1}`,
		`{"seq":1,"cmd":"batch","session":"w","queue":"q","n":1,"depth":1,"payload":"x","queues":[]}`,
		`{"seq":1,"cmd":"batch","session":"w","queue":"q","n":1,"depth":1,"payload":"x","queues":["r"]}`,
		`{"seq":1,"cmd":"batch","session":"w","queue":"q","n":1,"depth":1,"payload":"x","queues":["q","bad q"]}`,
		`{"seq":1,"cmd":"batch","session":"w","queue":"q","n":1,"depth":1,"payload":"x","queues":"q"}`,
		`{"seq":1,"cmd":"batch","session":"w","queue":"q","n":1,"depth":1,"payload":"x","queues":null}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"redis://127.0.0.1:x/0"}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"redis://127.0.0.1:1/+1"}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"redis://127.0.0.1:1/1.5"}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"redis://127.0.0.1:1/-1"}`,
		`{"seq":1,"cmd":"batch","session":"w","queue":"q","n":1,"depth":1,"payload":"x","queues":["q",1]}`,
		`{"seq":1,"cmd":"batch","session":"w","queue":"q","n":1,"depth":1,"payload":"x","queues":[` + strings.Repeat(`"q",`, 64) + `"q"]}`,
		`{"seq":1,"cmd":"disconnect","session":"w"}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"redis://127.0.0.1:1/0","ca_file":"/nonexistent/ca.pem"}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"rediss://127.0.0.1:1/0","ca_file":"/nonexistent/ca.pem"}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"unix:///tmp/x.sock"}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"redis://127.0.0.1:1/x"}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"redis://127.0.0.1:1/x","cluster":true}`,
		`{"seq":1,"cmd":"connect","session":"w","url":"redis://127.0.0.1:1/0","cluster":"yes"}`,
		`{"seq":1,"cmd":"connect","session":"","url":"redis://127.0.0.1:1/0"}`,
		`{"seq":1,"cmd":"connect","session":"w"}`,
		`{"seq":1,"cmd":"hello"}`,
	}
	for _, line := range cases {
		if k := errKind(reply(t, s, line)); k != KindInvalid {
			t.Errorf("%s: kind %q, want invalid", line, k)
		}
	}
}

func TestIntLiterals(t *testing.T) {
	good := map[string]int64{"0": 0, "-0": 0, "42": 42, "9223372036854775807": 1<<63 - 1}
	for lit, want := range good {
		if n, err := parseIntLiteral([]byte(lit)); err != nil || n != want {
			t.Errorf("%s: %d, %v", lit, n, err)
		}
	}
	for _, lit := range []string{"", "-", "1.0", "1e3", "+1", "0x10", `"1"`, "true", "9223372036854775808"} {
		if _, err := parseIntLiteral([]byte(lit)); err == nil {
			t.Errorf("%s parsed as an integer", lit)
		}
	}
}

func TestQueueAndProbeKeyRules(t *testing.T) {
	for _, q := range []string{"a", "orders", "A.b-c_9", strings.Repeat("z", 128)} {
		if err := CheckQueue(q); err != nil {
			t.Errorf("%q refused: %v", q, err)
		}
	}
	for _, q := range []string{"", "a b", "a:b", "{a}", "é", strings.Repeat("z", 129), "q\n", "\nq", "q\r", "q\x00", "ａ", "٣"} {
		if CheckQueue(q) == nil {
			t.Errorf("%q accepted", q)
		}
	}
	for _, k := range []string{"EMQ:x", "emqx", "x", "emq"} {
		if err := CheckProbeKey(k); err != nil {
			t.Errorf("probe key %q refused: %v", k, err)
		}
	}
}

func TestParseTarget(t *testing.T) {
	tg, err := ParseTarget("redis://:s3cret@127.0.0.1:6390/7", false)
	if err != nil || tg.Addr != "127.0.0.1:6390" || tg.Password != "s3cret" || tg.DB != 7 || tg.User != "" {
		t.Fatalf("%+v %v", tg, err)
	}
	tg, err = ParseTarget("redis://127.0.0.1:6390", true)
	if err != nil || tg.DB != 0 || !tg.Cluster || tg.Password != "" {
		t.Fatalf("%+v %v", tg, err)
	}
	tg, err = ParseTarget("REDIS://:p%40w@[::1]:6390/", false)
	if err != nil || tg.Addr != "[::1]:6390" || tg.Password != "p@w" || tg.DB != 0 {
		t.Fatalf("%+v %v", tg, err)
	}
	if _, err := ParseTarget("redis://:pw@127.0.0.1:6390/0", true); err != nil {
		t.Fatal(err)
	}
	// A cluster url names any database (R8.5): the engine, not the client, refuses one it does
	// not serve (cluster_test.go), so even one past any cluster-databases count parses.
	for raw, db := range map[string]int{"redis://emq:pw@127.0.0.1:6390/9": 9, "rediss://emq:pw@localhost:6390/16": 16, "redis://127.0.0.1:6390/1023": 1023, "redis://127.0.0.1:6390/": 0} {
		if tg, err := ParseTarget(raw, true); err != nil || tg.DB != db || !tg.Cluster {
			t.Errorf("cluster url %s: %+v %v, want database %d", raw, tg, err, db)
		}
	}
	tg, err = ParseTarget("rediss://:pw@localhost:6390/2", false)
	if err != nil || !tg.TLS || tg.Addr != "localhost:6390" || tg.Host != "localhost" || tg.DB != 2 {
		t.Fatalf("%+v %v", tg, err)
	}
	for _, bad := range []string{"http://h:1", "redis://", "rediss://", "unix:///tmp/x", "valkeys://h:1", "redis://h:99999", "redis://h:1/-1", "redis://h:1/a", "redis://h:1/0?x=1"} {
		for _, cluster := range []bool{false, true} {
			if _, err := ParseTarget(bad, cluster); err == nil || err.Kind != KindInvalid {
				t.Errorf("%s accepted (cluster %v)", bad, cluster)
			}
		}
	}
}

func TestEncoding(t *testing.T) {
	if got := string(encodeOK(json.RawMessage("7"), nil)); got != "{\"seq\":7,\"ok\":null}\n" {
		t.Fatal(got)
	}
	if got := string(encodeOK(json.RawMessage("7"), struct{}{})); got != "{\"seq\":7,\"ok\":{}}\n" {
		t.Fatal(got)
	}
	if got := string(encodeOK(json.RawMessage("7"), []BrowsedJob{})); got != "{\"seq\":7,\"ok\":[]}\n" {
		t.Fatal(got)
	}
	got := string(encodeErr(json.RawMessage("8"), invalidf("x must be %d", 1)))
	if got != "{\"seq\":8,\"error\":{\"kind\":\"invalid\",\"message\":\"x must be 1\"}}\n" {
		t.Fatal(got)
	}
	c := &Claimed{ID: "j0000000000000001", Payload: "a\u0000<b>\"", Attempts: 1}
	var back Claimed
	if err := json.Unmarshal(bytes.TrimSpace(encodeOK(json.RawMessage("1"), c))[len(`{"seq":1,"ok":`):len(encodeOK(json.RawMessage("1"), c))-2], &back); err != nil || back != *c {
		t.Fatalf("claim round trip: %+v %v", back, err)
	}
}

func TestBundleChecks(t *testing.T) {
	b := testBundle(t)
	if b.Digest != "1de960bd4544272d03488e8d9fe0b744147b1802" || b.Protocol != "1" || len(b.Scripts) != 6 {
		t.Fatalf("%+v", b)
	}
	// A tampered copy is refused.
	dir := t.TempDir()
	src := filepath.Join("..", "..", "bundle")
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile := func(rel string, mutate func([]byte) []byte) {
		data, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			t.Fatal(err)
		}
		if mutate != nil {
			data = mutate(data)
		}
		if err := os.WriteFile(filepath.Join(dir, rel), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyFile("manifest.json", nil)
	for _, n := range scriptOrder {
		copyFile("scripts/"+n+".lua", nil)
	}
	if _, err := LoadBundle(dir); err != nil {
		t.Fatalf("faithful copy refused: %v", err)
	}
	copyFile("scripts/claim.lua", func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")) })
	if _, err := LoadBundle(dir); err == nil {
		t.Fatal("a CRLF claim.lua was accepted")
	}
	copyFile("scripts/claim.lua", nil)
	copyFile("scripts/reap.lua", func(b []byte) []byte { return append(b, "-- x\n"...) })
	if _, err := LoadBundle(dir); err == nil || !strings.Contains(err.Error(), "reap") {
		t.Fatalf("a changed reap.lua was accepted: %v", err)
	}
}

func TestResponseLineLimit(t *testing.T) {
	fits := strings.Repeat("x", maxResponseLine-len(`{"seq":1,"ok":""}`))
	if got := encodeReply(json.RawMessage("1"), "browse", fits); len(got)-1 != maxResponseLine || !bytes.Contains(got, []byte(`"ok"`)) {
		t.Fatalf("a reply of exactly the limit was not sent as is (%d bytes)", len(got)-1)
	}
	got := encodeReply(json.RawMessage("1"), "browse", fits+"x")
	if len(got) > 1000 || !bytes.Contains(got, []byte(`"kind":"internal"`)) {
		t.Fatalf("an over-long reply: %.200s", got)
	}
}
