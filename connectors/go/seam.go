package main

// The sole raw-Redis seam (SPEC R4.15): this file alone imports the client library (redigo, and
// redisc for cluster slots and redirect parsing) and alone spells the key schema. seam_test.go
// enforces that. Everything that reaches the engine goes through exec below:
//
//   - EVALSHA first (R4.9): a NOSCRIPT reply costs one SCRIPT LOAD on the node that answered it and
//     one re-send of the calls that answered NOSCRIPT (they did not run); NOSCRIPT again is engine.
//   - No silent re-send (R4.16): any I/O error or timeout drops every connection of the session and
//     surfaces as kind engine. The session reconnects only at its next verb, and a reconnect is a
//     connect: it reads the fence first (R3.1).
//   - Cluster (R8.1-R8.5): one connection per primary, routed by the {q} slot; MOVED refreshes the
//     slot map (and re-reads the fence) and re-sends to the named node; ASK sends ASKING and the
//     call to the named node; TRYAGAIN/CLUSTERDOWN are re-sent after a pause. All four say the call
//     did not run. Never a replica, never READONLY. The url's database is the session's on every
//     node (R8.5): every node connection (the seed, the slot map's, a redirect's, a replacement)
//     is opened by conn below, which has redigo send SELECT right after AUTH.
//   - TLS (SPEC §10): a rediss:// session dials every connection (the seed, every node of the slot
//     map or of a redirect, every reconnect) through conn below with the same TLS options: the
//     session's CAs only (ca_file; the system store without it), the host name of that connection
//     checked against the certificate, TLS from the first byte. Verification is never switched off
//     and nothing falls back to plaintext.
//   - Sentinel (SPEC §11): every (re)connect asks the Sentinels in order (AUTH and
//     SENTINEL get-master-addr-by-name only, no SELECT, each closed after its answer, 1 s each),
//     sends ROLE to the node named before anything else but AUTH (that whole check, 2 s) and
//     uses it only if it says master; a lost connection, a timeout or READONLY forgets the
//     primary, and the next verb finds it again the same way (fence first). The Sentinels are
//     dialled by dial below, with the session's TLS options.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"
)

const (
	keyPrefix   = "emq:"
	fenceKey    = "emq:fence"
	dialTimeout = 3 * time.Second
	ioTimeout   = 4 * time.Second // per reply; the harness allows 10 s per request (R5.8)
	maxRounds   = 16              // redirect / TRYAGAIN rounds before giving up (engine)
	numSlots    = 16384
)

// queueKeys is the key schema of one queue (SPEC §1).
type queueKeys struct{ pending, active, delayed, dead, seq, root string }

func keysOf(q string) queueKeys {
	p := keyPrefix + "{" + q + "}:"
	return queueKeys{p + "pending", p + "active", p + "delayed", p + "dead", p + "seq", p + "job:"}
}

// CheckProbeKey applies R4.7: non-empty and not under emq: (a case-sensitive prefix test).
func CheckProbeKey(key string) *WireError {
	if key == "" {
		return invalidf("key must be non-empty")
	}
	if strings.HasPrefix(key, keyPrefix) {
		return invalidf("key %q must not be under %s", key, keyPrefix)
	}
	return nil
}

// Target is a parsed connect url: redis[s]://[:password@]host:port[/db], with connect's ca_file.
type Target struct {
	Addr     string
	Host     string
	User     string
	Password string
	DB       int
	Cluster  bool
	TLS      bool           // rediss:// (SPEC §10): every connection of the session speaks TLS
	CAFile   string         // connect's ca_file, when given
	RootCAs  *x509.CertPool // the CAs of ca_file, and only those; nil: the system's store (R10.1)
	Sentinel *SentinelField // connect's sentinel (R11.1): the primary is found through these
}

// UseSentinel makes the session one behind Sentinel (R11.1): the url names the first Sentinel and
// gives the scheme, the user, the password and the database; the Sentinels of s.Nodes, asked in
// order, name the primary. Not with "cluster": true (invalid, nothing dialled).
func (t *Target) UseSentinel(s *SentinelField) *WireError {
	if t.Cluster {
		return invalidf("sentinel and \"cluster\": true exclude each other: a Sentinel deployment is one primary")
	}
	t.Sentinel = s
	return nil
}

// ParseTarget checks the url (scheme redis or rediss, SPEC §5 and §10; a decimal database, R9.1).
// Any database goes, on a cluster too (R8.5): only the engine knows how many it serves, so a
// database it does not serve (or the url's user may not use) is its SELECT's error reply, kind
// engine at connect. url.Parse lower-cases the scheme.
func ParseTarget(raw string, cluster bool) (Target, *WireError) {
	var t Target
	u, err := url.Parse(raw)
	if err != nil {
		return t, invalidf("url %q does not parse: %v", raw, err)
	}
	switch u.Scheme {
	case "redis":
	case "rediss":
		t.TLS = true
	default:
		return t, invalidf("url scheme %q is not supported (only redis:// or rediss://host:port[/db])", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return t, invalidf("url %q must be %s://[:password@]host:port[/db]", raw, u.Scheme)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		host, port = u.Host, "6379"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return t, invalidf("url %q has a bad port", raw)
	}
	if host == "" {
		return t, invalidf("url %q has no host", raw)
	}
	t.Host, t.Addr, t.Cluster = host, net.JoinHostPort(host, port), cluster
	if u.User != nil {
		t.User = u.User.Username()
		t.Password, _ = u.User.Password()
	}
	if path := strings.TrimPrefix(u.Path, "/"); path != "" {
		db, err := strconv.Atoi(path)
		if err != nil || strings.Trim(path, "0123456789") != "" {
			return t, invalidf("url %q: database %q is not a number", raw, path)
		}
		t.DB = db
	}
	return t, nil
}

// LoadCAFile applies connect's ca_file (R10.1): it needs a rediss:// url, must be readable and must
// hold at least one PEM certificate, every one of which must parse; otherwise kind invalid, before
// anything is dialled. The session then trusts these CAs only (tls.Config.RootCAs replaces the
// system's store, crypto/tls common.go: "If RootCAs is nil, TLS uses the host's root CA set").
func (t *Target) LoadCAFile(path string) *WireError {
	if !t.TLS {
		return invalidf("ca_file needs a rediss:// url (TLS); this url is redis://")
	}
	if path == "" {
		return invalidf("ca_file must name a PEM file, got an empty string")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return invalidf("ca_file %q cannot be read: %v", path, err)
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return invalidf("ca_file %q: certificate %d does not parse: %v", path, n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return invalidf("ca_file %q holds no PEM certificate", path)
	}
	t.CAFile, t.RootCAs = path, pool
	return nil
}

// tlsConfig is the TLS configuration of one connection to addr: the session's CAs and the host
// name of addr (the url's host for the seed, the slot map's or the redirect's host for a cluster
// node, or where those name none the host of the node that answered, R8.13), which crypto/tls
// checks against the certificate. InsecureSkipVerify stays false.
func (t *Target) tlsConfig(addr string) (*tls.Config, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if host == "" {
		return nil, fmt.Errorf("no host name to verify the certificate against")
	}
	return &tls.Config{RootCAs: t.RootCAs, ServerName: host, MinVersion: tls.VersionTLS12}, nil
}

// dialError names why a dial failed; a TLS verification failure says which check refused it.
func (t *Target) dialError(addr string, err error) *WireError {
	if re, ok := err.(redis.Error); ok {
		return enginef("connect to %s: %s", addr, string(re))
	}
	if !t.TLS {
		return enginef("connect to %s: %v", addr, err)
	}
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	var rh tls.RecordHeaderError
	why := "TLS failed"
	switch {
	case errors.As(err, &ua):
		why = "TLS: server certificate refused, not signed by a trusted CA (" + t.trustName() + ")"
	case errors.As(err, &he):
		why = "TLS: server certificate refused, it does not name the host"
	case errors.As(err, &ci):
		why = "TLS: server certificate refused, invalid (expired, not yet valid or not for a server)"
	case errors.As(err, &rh):
		why = "TLS: the server did not answer with TLS"
	}
	return enginef("connect to %s: %s: %v", addr, why, err)
}

func (t *Target) trustName() string {
	if t.CAFile != "" {
		return "ca_file " + t.CAFile
	}
	return "the system's store"
}

// Engine is one session's connection(s): one on a single engine, one per primary on a cluster.
type Engine struct {
	b       *Bundle
	t       Target
	logf    func(string, ...interface{})
	conns   map[string]redis.Conn
	slots   []string // cluster: slot -> primary address
	nodes   []string // cluster: every address seen, to find the slot map again
	broken  bool     // a connection failed: reconnect (fence first) at the next verb
	inFence bool     // reading or installing the fence (no fence re-read from inside it)
	primary string   // behind Sentinel: the primary this connect found (R11.1), never reused after a loss
}

// Open connects a session: dial, (cluster: learn the slot map), read the fence (SPEC §3).
func Open(b *Bundle, t Target, logf func(string, ...interface{})) (*Engine, *WireError) {
	e := &Engine{b: b, t: t, logf: logf, conns: map[string]redis.Conn{}, nodes: []string{t.Addr}}
	if err := e.establish(); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Close closes every connection of the session.
func (e *Engine) Close() {
	for addr, c := range e.conns {
		c.Close()
		delete(e.conns, addr)
	}
}

// fail drops every connection after an I/O error, so no late reply is ever read (R4.16).
func (e *Engine) fail(addr string, err error) *WireError {
	e.Close()
	e.broken = true
	return enginef("connection to %s failed: %v", addr, err)
}

func (e *Engine) establish() *WireError {
	e.Close()
	e.broken = true
	if e.t.Sentinel != nil {
		// Behind Sentinel every (re)connect asks the Sentinels afresh and checks ROLE (R11.1-R11.3).
		if err := e.discover(); err != nil {
			return err
		}
	}
	if e.t.Cluster {
		if err := e.refreshSlots(); err != nil {
			return err
		}
		// A session is a connection per node (R8.1): open one to every primary now, so a node
		// that cannot be reached fails the connect, not a later verb.
		for _, addr := range e.primaries() {
			if _, err := e.conn(addr); err != nil {
				e.Close()
				return err
			}
		}
	}
	if err := e.checkFence(); err != nil {
		return err
	}
	e.broken = false
	return nil
}

// ready reconnects a broken session, fence first: a new connection is a connect (R3.1, §7).
func (e *Engine) ready() *WireError {
	if !e.broken {
		return nil
	}
	if e.t.Sentinel != nil {
		e.logf("session behind Sentinel %q reconnects (Sentinels asked again, ROLE, fence first)", e.t.Sentinel.Name)
	} else {
		e.logf("session to %s reconnects (fence first)", e.t.Addr)
	}
	return e.establish()
}

func (e *Engine) conn(addr string) (redis.Conn, *WireError) {
	if c, ok := e.conns[addr]; ok {
		if c.Err() == nil {
			return c, nil
		}
		return nil, e.fail(addr, c.Err())
	}
	if e.t.Sentinel != nil {
		// Behind Sentinel only discover dials a data node (ROLE first, R11.2); a connection that
		// is gone is found again through the Sentinels at the next verb (R11.3).
		e.Close()
		e.broken = true
		return nil, enginef("the connection to the primary %s is gone; the next call asks the Sentinels again", addr)
	}
	// The database on every connection, a cluster node's too (R8.5): a redirect names a node,
	// never a database, so each connection this opens (the seed, a slot map's primary, a MOVED or
	// ASK target, a replacement after a failure) selects it at dial, before anything else.
	c, _, err := e.dial(addr, dialTimeout, ioTimeout, e.t.DB != 0, time.Time{})
	if err != nil {
		return nil, err
	}
	e.conns[addr] = c
	return c, nil
}

// dial opens one connection to addr, authenticated as the url's user (AUTH before anything else,
// R4.19), with SELECT of the url's database when withDB. Every connection of the session (data
// nodes and Sentinels alike) is dialled here, so a rediss:// session speaks TLS from the first
// byte of each (R10.2), with the session's CAs and addr's host as the name to verify.
// redigo's DialContext sends AUTH, then SELECT (redigo 1.8.3 conn.go:287-297, :306-311) before it
// returns the connection, and returns an error reply to either as the redis.Error itself, having
// closed the socket: so a database the engine refuses (out of range, not allowed in cluster mode,
// NOPERM) fails that dial with kind engine and the engine's text (dialError), nothing else sent.
// A non-zero until caps everything on the connection at that instant (the TCP connect, the TLS
// handshake, the AUTH and SELECT redigo sends inside the dial, then the caller's commands) until
// the returned capConn is released: redigo's read timeout alone would give AUTH rw (R11.1).
func (e *Engine) dial(addr string, connect, rw time.Duration, withDB bool, until time.Time) (redis.Conn, *capConn, *WireError) {
	var capped *capConn
	if !until.IsZero() {
		if connect = time.Until(until); connect <= 0 {
			return nil, nil, enginef("connect to %s: no time left", addr)
		}
	}
	opts := []redis.DialOption{
		redis.DialConnectTimeout(connect),
		redis.DialReadTimeout(rw),
		redis.DialWriteTimeout(rw),
	}
	if e.t.Password != "" {
		opts = append(opts, redis.DialPassword(e.t.Password))
		if e.t.User != "" {
			opts = append(opts, redis.DialUsername(e.t.User))
		}
	}
	if withDB {
		opts = append(opts, redis.DialDatabase(e.t.DB))
	}
	if e.t.TLS {
		// redigo wraps the TCP connection in tls.Client before AUTH (conn.go:243-276), clones
		// this config and keeps its ServerName (:248-257).
		cfg, err := e.t.tlsConfig(addr)
		if err != nil {
			return nil, nil, enginef("connect to %s: TLS: %v", addr, err)
		}
		opts = append(opts, redis.DialUseTLS(true), redis.DialTLSConfig(cfg),
			redis.DialTLSHandshakeTimeout(connect))
	}
	if !until.IsZero() {
		// redigo's own dialer and keep-alive (conn.go:224-228), the socket wrapped.
		d := net.Dialer{Deadline: until, KeepAlive: 5 * time.Minute}
		opts = append(opts, redis.DialContextFunc(func(ctx context.Context, network, a string) (net.Conn, error) {
			nc, err := d.DialContext(ctx, network, a)
			if err != nil {
				return nil, err
			}
			nc.SetDeadline(until) // redigo sets none for the TLS handshake
			capped = &capConn{Conn: nc, until: until}
			return capped, nil
		}))
	}
	c, err := redis.Dial("tcp", addr, opts...)
	if err != nil {
		return nil, nil, e.t.dialError(addr, err)
	}
	return c, capped, nil
}

// capConn is a socket whose deadlines never pass until while it is set: redigo sets its own
// (now + its read or write timeout) before every read and write, and this keeps them inside one
// bound. release gives the connection back its own timeouts (P4.11: the session's reads get
// ioTimeout, not what is left of a Sentinel's share).
type capConn struct {
	net.Conn
	until time.Time
}

func (c *capConn) capped(t time.Time) time.Time {
	if !c.until.IsZero() && (t.IsZero() || t.After(c.until)) {
		return c.until
	}
	return t
}

func (c *capConn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(c.capped(t)) }
func (c *capConn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.capped(t)) }
func (c *capConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.capped(t)) }

// release lifts the cap; redigo sets its read and write deadlines again before the next command.
func (c *capConn) release() {
	c.until = time.Time{}
	c.Conn.SetDeadline(time.Time{})
}

// ---- behind Sentinel (SPEC §11) ----

const (
	// sentinelTimeout bounds each Sentinel, all of it (connect, TLS handshake, AUTH, the answer):
	// a refusing or silent one costs at most this and the next is asked (R11.1).
	sentinelTimeout = time.Second
	// namedTimeout bounds all of the check of a node a Sentinel named (connect, TLS handshake,
	// AUTH, ROLE, SELECT, R11.2): a silent one costs at most this per Sentinel.
	namedTimeout = 2 * time.Second
	// discoverTimeout bounds one whole discovery, so that connect (or the call after a loss,
	// R11.3) still has time for the fence within R5.8's 10 s.
	discoverTimeout = 7 * time.Second
)

// discover finds the primary (R11.1, R11.2): each Sentinel in order, on its own connection
// (AUTH as the url's user, no SELECT, closed after the answer), is asked
// SENTINEL get-master-addr-by-name, and nothing else (R11.4). The node it names is dialled
// without SELECT and sent ROLE; only a "master" reply makes it the session's primary (then
// SELECT of the url's database). Anything else closes that connection with nothing more sent,
// and the next Sentinel is asked. No address is remembered from an earlier connect (R11.3).
func (e *Engine) discover() *WireError {
	s := e.t.Sentinel
	e.primary = ""
	var why []string
	answered, named := 0, 0
	end := time.Now().Add(discoverTimeout)
	for _, sa := range s.Nodes {
		if time.Until(end) < 50*time.Millisecond {
			why = append(why, fmt.Sprintf("Sentinel %s not asked: discovery out of time", sa))
			continue
		}
		host, port, err := e.askSentinel(sa, s.Name, earliest(time.Now().Add(sentinelTimeout), end))
		if err != nil {
			why = append(why, fmt.Sprintf("Sentinel %s: %s", sa, err))
			continue
		}
		answered++
		if host == "" {
			why = append(why, fmt.Sprintf("Sentinel %s does not know %q (null)", sa, s.Name))
			continue
		}
		named++
		addr := net.JoinHostPort(host, port)
		c, werr := e.checkPrimary(addr, earliest(time.Now().Add(namedTimeout), end))
		if werr != nil {
			why = append(why, fmt.Sprintf("Sentinel %s named %s: %s", sa, addr, werr.Msg))
			continue
		}
		e.conns[addr] = c
		e.primary = addr
		return nil
	}
	summary := "no Sentinel named a primary that answers ROLE with master"
	switch {
	case answered == 0:
		summary = "no Sentinel answered"
	case named == 0:
		summary = fmt.Sprintf("no Sentinel knows the name %q", s.Name)
	}
	return enginef("Sentinel discovery of %q failed, %s: %s", s.Name, summary, strings.Join(why, "; "))
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// askSentinel asks one Sentinel for the primary's address, all of it done by until; ("", "", nil)
// is a null answer.
func (e *Engine) askSentinel(addr, name string, until time.Time) (string, string, error) {
	c, _, werr := e.dial(addr, sentinelTimeout, sentinelTimeout, false, until)
	if werr != nil {
		return "", "", errors.New(werr.Msg)
	}
	defer c.Close()
	v, err := c.Do("SENTINEL", "get-master-addr-by-name", name)
	if err != nil {
		if re, ok := err.(redis.Error); ok {
			return "", "", fmt.Errorf("error reply %s", string(re))
		}
		return "", "", fmt.Errorf("no answer: %v", err)
	}
	if v == nil {
		return "", "", nil
	}
	xs, err := redis.Strings(v, nil)
	if err != nil || len(xs) != 2 {
		return "", "", fmt.Errorf("unexpected reply %#v", v)
	}
	if p, err := strconv.Atoi(xs[1]); err != nil || p < 1 || p > 65535 || xs[0] == "" {
		return "", "", fmt.Errorf("unexpected address %q %q", xs[0], xs[1])
	}
	return xs[0], xs[1], nil
}

// checkPrimary opens a connection to a node a Sentinel named and sends ROLE before anything but
// AUTH (R11.2); it keeps the connection (and then selects the url's database) only if the node
// says master. On any other outcome the connection is closed with nothing more sent on it.
// All of it, the AUTH inside the dial included, ends by until; then the session's timeouts hold.
func (e *Engine) checkPrimary(addr string, until time.Time) (redis.Conn, *WireError) {
	c, capped, werr := e.dial(addr, namedTimeout, ioTimeout, false, until)
	if werr != nil {
		return nil, werr
	}
	v, err := c.Do("ROLE")
	if err != nil {
		c.Close()
		if re, ok := err.(redis.Error); ok {
			return nil, enginef("ROLE answered %s", string(re))
		}
		return nil, enginef("ROLE: %v", err)
	}
	role := ""
	if xs, err := redis.Values(v, nil); err == nil && len(xs) > 0 {
		role, _ = redis.String(xs[0], nil)
	}
	if role != "master" {
		c.Close()
		if role == "" {
			return nil, enginef("ROLE answered %#v", v)
		}
		return nil, enginef("ROLE says %s, not master", role)
	}
	if e.t.DB != 0 {
		if _, err := c.Do("SELECT", e.t.DB); err != nil {
			c.Close()
			return nil, enginef("SELECT %d: %v", e.t.DB, err)
		}
	}
	capped.release()
	return c, nil
}

// ---- the fence (SPEC §3) ----

func (e *Engine) fenceRead() (map[string]string, *WireError) {
	r, err := e.exec([]*op{{key: fenceKey, cmd: "HGETALL", args: []interface{}{fenceKey}}}, 1, false)
	if err != nil {
		return nil, err
	}
	if re, ok := r[0].(redis.Error); ok {
		return nil, enginef("reading %s: %s", fenceKey, string(re))
	}
	m, cerr := redis.StringMap(r[0], nil)
	if cerr != nil {
		return nil, enginef("reading %s: %v", fenceKey, cerr)
	}
	return m, nil
}

func (e *Engine) checkFence() *WireError {
	e.inFence = true
	defer func() { e.inFence = false }()
	f, err := e.fenceRead()
	if err != nil {
		return err
	}
	if _, ok := f["protocol"]; !ok {
		// Absent (or without protocol): install ours with HSETNX in MULTI/EXEC, then read again (R3.2).
		ops := []*op{
			{key: fenceKey, cmd: "MULTI"},
			{key: fenceKey, cmd: "HSETNX", args: []interface{}{fenceKey, "protocol", e.b.Protocol}},
			{key: fenceKey, cmd: "HSETNX", args: []interface{}{fenceKey, "bundle", e.b.Version}},
			{key: fenceKey, cmd: "HSETNX", args: []interface{}{fenceKey, "digest", e.b.Digest}},
			{key: fenceKey, cmd: "EXEC"},
		}
		r, err := e.exec(ops, len(ops), true)
		if err != nil {
			return err
		}
		for _, x := range r {
			if re, ok := x.(redis.Error); ok {
				return enginef("installing %s: %s", fenceKey, string(re))
			}
		}
		if f, err = e.fenceRead(); err != nil {
			return err
		}
	}
	p, ok := f["protocol"]
	if !ok {
		p = "(absent)"
	}
	if p != e.b.Protocol {
		return &WireError{KindFence, fmt.Sprintf("fence protocol %s (bundle %s) does not match connector protocol %s",
			p, f["bundle"], e.b.Protocol)}
	}
	if f["digest"] != e.b.Digest {
		e.logf("warning: fence digest %s (bundle %s) differs from this connector's %s (bundle %s)",
			f["digest"], f["bundle"], e.b.Digest, e.b.Version)
	}
	return nil
}

// ---- cluster slot map (R8.1) ----

func (e *Engine) refreshSlots() *WireError {
	var tried []string
	cands := append([]string{}, e.nodes...)
	for addr := range e.conns {
		cands = append([]string{addr}, cands...)
	}
	seen := map[string]bool{}
	for _, addr := range cands {
		if seen[addr] {
			continue
		}
		seen[addr] = true
		_, existing := e.conns[addr]
		c, err := e.conn(addr)
		if err != nil {
			tried = append(tried, err.Msg)
			continue
		}
		v, rerr := c.Do("CLUSTER", "SLOTS")
		if rerr != nil {
			if re, ok := rerr.(redis.Error); ok {
				return enginef("CLUSTER SLOTS on %s: %s", addr, string(re))
			}
			if existing {
				// A connection the session was using died: that is a connection failure (R4.16).
				return e.fail(addr, rerr)
			}
			c.Close()
			delete(e.conns, addr)
			tried = append(tried, fmt.Sprintf("%s: %v", addr, rerr))
			continue
		}
		// A node the map names without a host (null, "", "?") is on the host of the node that
		// answered, the one this connection reached (R8.13), not on the seed url's host.
		slots, primaries, perr := parseSlots(v, addr)
		if perr != nil {
			return enginef("CLUSTER SLOTS on %s: %v", addr, perr)
		}
		e.slots = slots
		for _, p := range primaries {
			if !contains(e.nodes, p) {
				e.nodes = append(e.nodes, p)
			}
		}
		// Keep connections to primaries only: never a replica (R8.1).
		for a, c := range e.conns {
			if !contains(primaries, a) {
				c.Close()
				delete(e.conns, a)
			}
		}
		return nil
	}
	e.Close()
	e.broken = true
	return enginef("no cluster node answered CLUSTER SLOTS: %s", strings.Join(tried, "; "))
}

// primaries lists the primaries of the slot map, in slot order.
func (e *Engine) primaries() []string {
	var out []string
	for _, a := range e.slots {
		if a != "" && !contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// rereadSlots reads the slot map again and then the fence: a session that reads the slot map
// again reads the fence again (R8.1). The fence read itself never recurses into this.
func (e *Engine) rereadSlots() *WireError {
	if err := e.refreshSlots(); err != nil {
		return err
	}
	if e.inFence {
		return nil
	}
	return e.checkFence()
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// nodeAddr is the address to dial for a node a reply names as host:port, the reply having come
// over the connection to from (R8.13): a host left unnamed (null or "" with
// cluster-preferred-endpoint-type unknown-endpoint, or "?", a hostname the node lacks) is from's
// host, at the port given. Never the empty host: net.Dial(":port") dials the local system
// (Go 1.19 net/dial.go:314-317), and TLS has no name to check the certificate against.
func nodeAddr(host, port, from string) string {
	if host == "" || host == "?" {
		host, _, _ = net.SplitHostPort(from)
	}
	return net.JoinHostPort(host, port)
}

// redirAddr is the node a MOVED or ASK names (redisc.ParseRedir's Addr, as the engine spelt it:
// ":7001" when the cluster has no endpoint to give), read as nodeAddr does, relative to from, the
// node whose connection carried the redirect (the one the call was sent to).
func redirAddr(named, from string) string {
	host, port, err := net.SplitHostPort(named)
	if err != nil {
		return named // not host:port: dialled as given, and its dial fails with its own error
	}
	return nodeAddr(host, port, from)
}

// keySlot is the cluster hash slot of key (hash tags honoured).
func keySlot(key string) int { return redisc.Slot(key) }

// parseSlots reads a CLUSTER SLOTS reply that the node at address from answered (R8.13).
func parseSlots(v interface{}, from string) ([]string, []string, error) {
	ranges, err := redis.Values(v, nil)
	if err != nil {
		return nil, nil, err
	}
	slots := make([]string, numSlots)
	var primaries []string
	for _, r := range ranges {
		entry, err := redis.Values(r, nil)
		if err != nil || len(entry) < 3 {
			return nil, nil, fmt.Errorf("bad slot range %v", r)
		}
		start, err1 := redis.Int(entry[0], nil)
		end, err2 := redis.Int(entry[1], nil)
		node, err3 := redis.Values(entry[2], nil)
		if err1 != nil || err2 != nil || err3 != nil || len(node) < 2 || start < 0 || end >= numSlots || start > end {
			return nil, nil, fmt.Errorf("bad slot range %v", r)
		}
		host, _ := redis.String(node[0], nil)
		port, perr := redis.Int(node[1], nil)
		if perr != nil {
			return nil, nil, fmt.Errorf("bad node %v", node)
		}
		addr := nodeAddr(host, strconv.Itoa(port), from)
		for s := start; s <= end; s++ {
			slots[s] = addr
		}
		if !contains(primaries, addr) {
			primaries = append(primaries, addr)
		}
	}
	if len(primaries) == 0 {
		return nil, nil, fmt.Errorf("the cluster serves no slots")
	}
	return slots, primaries, nil
}

func (e *Engine) route(key string) (string, *WireError) {
	if e.t.Sentinel != nil {
		if e.primary == "" {
			e.broken = true
			return "", enginef("no primary: the next call asks the Sentinels again")
		}
		return e.primary, nil
	}
	if !e.t.Cluster {
		return e.t.Addr, nil
	}
	addr := e.slots[keySlot(key)]
	if addr == "" {
		if err := e.rereadSlots(); err != nil {
			return "", err
		}
		if addr = e.slots[keySlot(key)]; addr == "" {
			return "", enginef("no primary serves the slot of %s", key)
		}
	}
	return addr, nil
}

// ---- the one way to the engine ----

// op is one command: a raw command, or (script set) an EVALSHA of a bundle script with args.
type op struct {
	key    string // routing key (its slot picks the node)
	cmd    string
	script *Script
	args   []interface{} // EVALSHA: numkeys, keys..., argv... (may be shared between ops)
	ask    string        // ASK target for the next send
	loaded bool          // a SCRIPT LOAD was already spent on this op
}

func (o *op) send(c redis.Conn) error {
	if o.ask != "" {
		if err := c.Send("ASKING"); err != nil {
			return err
		}
	}
	if o.script != nil {
		return c.Send("EVALSHA", append([]interface{}{o.script.SHA}, o.args...)...)
	}
	return c.Send(o.cmd, o.args...)
}

func errPrefix(re redis.Error) string {
	s := string(re)
	if i := strings.IndexByte(s, ' '); i >= 0 {
		return s[:i]
	}
	return s
}

var debugRedirects = os.Getenv("EMQ_GO_DEBUG") != ""

// errNotSent marks ops a batch did not send after an earlier error reply.
var errNotSent = redis.Error("ERR not sent: an earlier command of the batch failed")

// exec sends ops, grouped by node and in their order within a node, in pipelines of depth, and
// returns one reply per op: a value or a redis.Error. An I/O failure drops the session's
// connections and returns kind engine; nothing is re-sent after it. Calls answered by MOVED, ASK,
// TRYAGAIN, CLUSTERDOWN or NOSCRIPT did not run and are re-sent as SPEC allows. With stopOnError,
// ops after a final error reply are not sent (a batch stops at its first failure).
// After a MOVED the slot map is read again, and then the fence too (R8.1).
func (e *Engine) exec(ops []*op, depth int, stopOnError bool) ([]interface{}, *WireError) {
	replies := make([]interface{}, len(ops))
	todo := make([]int, len(ops))
	for i := range todo {
		todo[i] = i
	}
	failed := false
	readonly := false             // a node answered READONLY: the session starts afresh at its next verb (R8.11)
	last := map[int]redis.Error{} // the last redirect/TRYAGAIN reply per op, for the error message
	for round := 0; len(todo) > 0; round++ {
		if round >= maxRounds {
			for _, i := range todo {
				replies[i] = redis.Error(fmt.Sprintf("ERR %d cluster redirects or TRYAGAIN replies, the last %q; the call did not run", maxRounds, string(last[i])))
			}
			break
		}
		var order []string
		groups := map[string][]int{}
		for _, i := range todo {
			addr := ops[i].ask
			if addr == "" {
				var err *WireError
				if addr, err = e.route(ops[i].key); err != nil {
					return nil, err
				}
			}
			if _, ok := groups[addr]; !ok {
				order = append(order, addr)
			}
			groups[addr] = append(groups[addr], i)
		}
		var next []int
		moved := map[int]string{}
		pause := false
		for _, addr := range order {
			c, err := e.conn(addr)
			if err != nil {
				// A connection that could not be opened is a failed connection too: the session
				// starts afresh, fence first, at its next verb (R3.5).
				e.Close()
				e.broken = true
				return nil, err
			}
			idx := groups[addr]
			for start := 0; start < len(idx); start += depth {
				if failed && stopOnError {
					for _, i := range idx[start:] {
						replies[i] = errNotSent
					}
					break
				}
				end := start + depth
				if end > len(idx) {
					end = len(idx)
				}
				pending := idx[start:end]
				for attempt := 0; len(pending) > 0; attempt++ {
					noscript, werr := e.roundTrip(c, addr, ops, pending, replies)
					if werr != nil {
						return nil, werr
					}
					var again []int
					for _, i := range pending {
						re, isErr := replies[i].(redis.Error)
						if !isErr {
							continue
						}
						kind := errPrefix(re)
						if strings.HasPrefix(string(re), "READONLY ") && (e.t.Cluster || e.t.Sentinel != nil) {
							// R8.11, R11.3: the node was demoted (its error reply; the command of
							// that name is never sent). The call fails (it did not run, and is not
							// sent again, R4.17); the session starts afresh at its next verb, on new
							// connections (the slot map read again, or the Sentinels asked again),
							// fence first.
							readonly = true
						}
						if !e.t.Cluster && kind != "NOSCRIPT" {
							// One engine: a redirect is an error reply like any other (kind engine);
							// a connect without "cluster": true never follows one (R8.1).
							failed = true
							continue
						}
						switch kind {
						case "MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN":
							last[i] = re
							if debugRedirects {
								e.logf("round %d: %s answered %s to %s %v", round, addr, string(re), ops[i].cmd, ops[i].key)
							}
						}
						switch kind {
						case "MOVED":
							if r := redisc.ParseRedir(re); r != nil {
								moved[r.NewSlot] = redirAddr(r.Addr, addr)
							}
							next = append(next, i)
						case "ASK":
							if r := redisc.ParseRedir(re); r != nil {
								ops[i].ask = redirAddr(r.Addr, addr)
							}
							next = append(next, i)
						case "TRYAGAIN", "CLUSTERDOWN":
							pause = true
							next = append(next, i)
						case "NOSCRIPT":
							if noscript[i] {
								again = append(again, i)
							} else {
								failed = true
							}
						default:
							failed = true
						}
					}
					if len(again) > 0 {
						// One SCRIPT LOAD per script on this node, then re-send only these calls.
						loadedNow := map[*Script]bool{}
						for _, i := range again {
							s := ops[i].script
							if !loadedNow[s] {
								if werr := e.load(c, addr, s); werr != nil {
									return nil, werr
								}
								loadedNow[s] = true
							}
							ops[i].loaded = true
						}
					}
					pending = again
				}
			}
		}
		if len(moved) > 0 {
			if err := e.refreshSlots(); err != nil {
				return nil, err
			}
			for slot, addr := range moved {
				e.slots[slot] = addr // the redirect is authoritative, the map may lag behind it
			}
			if !e.inFence {
				// Reading the slot map again is a reconnect of sorts: the fence comes first (R8.1).
				if err := e.checkFence(); err != nil {
					return nil, err
				}
			}
		}
		if pause {
			time.Sleep(time.Duration(20*(round+1)) * time.Millisecond)
		}
		sort.Ints(next)
		todo = next
	}
	if readonly {
		e.Close()
		e.broken = true
	}
	return replies, nil
}

// roundTrip writes the pending ops to one connection as one pipeline and reads every reply.
// It returns which ops answered a NOSCRIPT that may still be answered by a load (first time).
func (e *Engine) roundTrip(c redis.Conn, addr string, ops []*op, pending []int, replies []interface{}) (map[int]bool, *WireError) {
	for _, i := range pending {
		if err := ops[i].send(c); err != nil {
			return nil, e.fail(addr, err)
		}
	}
	if err := c.Flush(); err != nil {
		return nil, e.fail(addr, err)
	}
	noscript := map[int]bool{}
	for _, i := range pending {
		o := ops[i]
		if o.ask != "" {
			if _, err := c.Receive(); err != nil {
				if _, ok := err.(redis.Error); !ok {
					return nil, e.fail(addr, err)
				}
			}
			o.ask = ""
		}
		v, err := c.Receive()
		if err != nil {
			re, ok := err.(redis.Error)
			if !ok {
				return nil, e.fail(addr, err)
			}
			replies[i] = re
			if errPrefix(re) == "NOSCRIPT" && o.script != nil && !o.loaded {
				noscript[i] = true
			}
			continue
		}
		replies[i] = v
	}
	return noscript, nil
}

func (e *Engine) load(c redis.Conn, addr string, s *Script) *WireError {
	v, err := c.Do("SCRIPT", "LOAD", s.Source)
	if err != nil {
		if re, ok := err.(redis.Error); ok {
			return enginef("SCRIPT LOAD %s on %s: %s", s.Name, addr, string(re))
		}
		return e.fail(addr, err)
	}
	sha, _ := redis.String(v, nil)
	if sha != s.SHA {
		return enginef("SCRIPT LOAD %s on %s answered %q, the bundle's sha1 is %s", s.Name, addr, sha, s.SHA)
	}
	return nil
}

// call runs one op and turns an error reply into kind engine.
func (e *Engine) call(o *op) (interface{}, *WireError) {
	if err := e.ready(); err != nil {
		return nil, err
	}
	r, err := e.exec([]*op{o}, 1, false)
	if err != nil {
		return nil, err
	}
	if re, ok := r[0].(redis.Error); ok {
		return nil, enginef("%s", string(re))
	}
	return r[0], nil
}

func (e *Engine) script(name string, keys []string, argv ...interface{}) *op {
	args := make([]interface{}, 0, 1+len(keys)+len(argv))
	args = append(args, len(keys))
	for _, k := range keys {
		args = append(args, k)
	}
	args = append(args, argv...)
	return &op{key: keys[0], script: e.b.Scripts[name], args: args}
}

func badReply(verb string, v interface{}) *WireError {
	return enginef("%s: unexpected reply %#v", verb, v)
}

// ---- the verbs ----

func (e *Engine) Enqueue(q, payload string, delay int64) (string, *WireError) {
	k := keysOf(q)
	v, err := e.call(e.script("enqueue", []string{k.pending, k.delayed, k.seq}, k.root, payload, delay))
	if err != nil {
		return "", err
	}
	id, cerr := redis.String(v, nil)
	if cerr != nil {
		return "", badReply("enqueue", v)
	}
	return id, nil
}

// Claimed is claim's ok value.
type Claimed struct {
	ID       string `json:"id"`
	Payload  string `json:"payload"`
	Attempts int64  `json:"attempts"`
}

func (e *Engine) Claim(q string, lease int64) (*Claimed, *WireError) {
	k := keysOf(q)
	v, err := e.call(e.script("claim", []string{k.pending, k.active}, k.root, lease))
	if err != nil {
		return nil, err
	}
	xs, cerr := redis.Values(v, nil)
	if cerr != nil || (len(xs) != 0 && len(xs) != 3) {
		return nil, badReply("claim", v)
	}
	if len(xs) == 0 {
		return nil, nil
	}
	id, e1 := redis.String(xs[0], nil)
	payload, e2 := redis.String(xs[1], nil)
	att, e3 := redis.Int64(xs[2], nil)
	if e1 != nil || e2 != nil || e3 != nil {
		return nil, badReply("claim", v)
	}
	return &Claimed{ID: id, Payload: payload, Attempts: att}, nil
}

func (e *Engine) Complete(q, id string, attempts int64) (bool, *WireError) {
	k := keysOf(q)
	v, err := e.call(e.script("complete", []string{k.active}, k.root, id, attempts))
	if err != nil {
		return false, err
	}
	n, cerr := redis.Int64(v, nil)
	if cerr != nil || (n != 0 && n != 1) {
		return false, badReply("complete", v)
	}
	return n == 1, nil
}

func (e *Engine) Retry(q, id string, attempts, backoff, maxAttempts int64) (string, *WireError) {
	k := keysOf(q)
	v, err := e.call(e.script("retry", []string{k.active, k.delayed, k.dead}, k.root, id, attempts, backoff, maxAttempts))
	if err != nil {
		return "", err
	}
	s, cerr := redis.String(v, nil)
	if cerr != nil || (s != "delayed" && s != "dead" && s != "stale") {
		return "", badReply("retry", v)
	}
	return s, nil
}

func (e *Engine) count(verb string, o *op) (int64, *WireError) {
	v, err := e.call(o)
	if err != nil {
		return 0, err
	}
	n, cerr := redis.Int64(v, nil)
	if cerr != nil {
		return 0, badReply(verb, v)
	}
	return n, nil
}

func (e *Engine) Promote(q string, limit int64) (int64, *WireError) {
	k := keysOf(q)
	return e.count("promote", e.script("promote", []string{k.delayed, k.pending}, k.root, limit))
}

func (e *Engine) Reap(q string, maxAttempts, limit int64) (int64, *WireError) {
	k := keysOf(q)
	return e.count("reap", e.script("reap", []string{k.active, k.pending, k.dead}, k.root, maxAttempts, limit))
}

func (e *Engine) PendingSize(q string) (int64, *WireError) {
	k := keysOf(q)
	return e.count("pending_size", &op{key: k.pending, cmd: "ZCARD", args: []interface{}{k.pending}})
}

// BrowsedJob is one entry of browse's ok value.
type BrowsedJob struct {
	ID      string `json:"id"`
	Payload string `json:"payload"`
}

// Browse is ZRANGE, then one HGET per id, pipelined (R2.5).
func (e *Engine) Browse(q string, offset, limit int64) ([]BrowsedJob, *WireError) {
	k := keysOf(q)
	v, err := e.call(&op{key: k.pending, cmd: "ZRANGE", args: []interface{}{k.pending, offset, offset + limit - 1}})
	if err != nil {
		return nil, err
	}
	ids, cerr := redis.Strings(v, nil)
	if cerr != nil {
		return nil, badReply("browse", v)
	}
	out := []BrowsedJob{}
	if len(ids) == 0 {
		return out, nil
	}
	ops := make([]*op, len(ids))
	for i, id := range ids {
		ops[i] = &op{key: k.root + id, cmd: "HGET", args: []interface{}{k.root + id, "payload"}}
	}
	rs, err := e.exec(ops, len(ops), false)
	if err != nil {
		return nil, err
	}
	for i, r := range rs {
		if re, ok := r.(redis.Error); ok {
			return nil, enginef("%s", string(re))
		}
		if r == nil {
			continue // the job went away between the two reads
		}
		p, cerr := redis.String(r, nil)
		if cerr != nil {
			return nil, badReply("browse", r)
		}
		out = append(out, BrowsedJob{ID: ids[i], Payload: p})
	}
	return out, nil
}

// Probe sends n INCR key as one pipeline (R4.11).
func (e *Engine) Probe(key string, n int64) ([]int64, *WireError) {
	if err := e.ready(); err != nil {
		return nil, err
	}
	args := []interface{}{key}
	ops := make([]*op, n)
	for i := range ops {
		ops[i] = &op{key: key, cmd: "INCR", args: args}
	}
	rs, err := e.exec(ops, len(ops), false)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(rs))
	for i, r := range rs {
		if re, ok := r.(redis.Error); ok {
			return nil, enginef("INCR %d of %d: %s", i+1, n, string(re))
		}
		v, cerr := redis.Int64(r, nil)
		if cerr != nil {
			return nil, badReply("pipeline_probe", r)
		}
		out[i] = v
	}
	return out, nil
}

// Batch sends n enqueues (delay 0) in pipelines of depth; enqueue i goes to queues[i % len]
// (R4.12). On a cluster the ops are split by node, in order within each queue (R8.3).
func (e *Engine) Batch(queues []string, n, depth int64, payload string) (int64, *WireError) {
	if err := e.ready(); err != nil {
		return 0, err
	}
	templates := make([]*op, len(queues))
	for j, q := range queues {
		k := keysOf(q)
		templates[j] = e.script("enqueue", []string{k.pending, k.delayed, k.seq}, k.root, payload, int64(0))
	}
	ops := make([]*op, n)
	for i := range ops {
		t := templates[i%len(templates)]
		ops[i] = &op{key: t.key, script: t.script, args: t.args}
	}
	if depth > n {
		depth = n
	}
	rs, err := e.exec(ops, int(depth), true)
	if err != nil {
		return 0, err
	}
	var done int64
	var first *WireError
	for i, r := range rs {
		if re, ok := r.(redis.Error); ok {
			if first == nil && re != errNotSent {
				first = enginef("batch enqueue %d of %d: %s", i+1, n, string(re))
			}
			continue
		}
		if _, cerr := redis.String(r, nil); cerr != nil {
			return 0, badReply("batch", r)
		}
		done++
	}
	if first != nil {
		return 0, first
	}
	return done, nil
}
