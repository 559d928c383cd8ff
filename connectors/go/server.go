package main

// The wire loop and the verbs: validation first (nothing reaches the engine on a bad argument),
// then the session, then the seam (seam.go) for everything that talks to the engine.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

const (
	connectorName    = "echomq-go"
	connectorVersion = "0.1.0"
	wireProtocol     = 1
)

// Server holds the sessions of one process (R5.7).
type Server struct {
	b        *Bundle
	sessions map[string]*Engine
	logf     func(format string, a ...interface{})
}

func NewServer(b *Bundle) *Server {
	return &Server{b: b, sessions: map[string]*Engine{}, logf: func(format string, a ...interface{}) {
		fmt.Fprintf(os.Stderr, "emq-connector-go: "+format+"\n", a...)
	}}
}

// Serve answers requests until stop or end of input.
func (s *Server) Serve(in io.Reader, out io.Writer) {
	r := bufio.NewReaderSize(in, 1<<20)
	w := bufio.NewWriterSize(out, 1<<16)
	defer s.closeAll()
	for {
		line, err := r.ReadBytes('\n')
		if len(trimSpace(line)) > 0 {
			resp, stop := s.Handle(line)
			if stop {
				return
			}
			w.Write(resp)
			w.Flush()
		}
		if err != nil {
			return
		}
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}

func (s *Server) closeAll() {
	for name, e := range s.sessions {
		e.Close()
		delete(s.sessions, name)
	}
}

// Handle answers one line; stop is true for the stop command (no response, R5.9).
func (s *Server) Handle(line []byte) (resp []byte, stop bool) {
	req, perr := ParseRequest(line)
	if perr != nil {
		return encodeErr(req.Seq, perr), false
	}
	if req.Cmd == "stop" {
		return nil, true
	}
	ok, err := s.dispatch(req)
	if err != nil {
		return encodeErr(req.Seq, err), false
	}
	return encodeReply(req.Seq, req.Cmd, ok), false
}

func (s *Server) dispatch(req *Request) (ok interface{}, werr *WireError) {
	defer func() {
		if p := recover(); p != nil {
			s.logf("panic in %s: %v\n%s", req.Cmd, p, debug.Stack())
			ok, werr = nil, &WireError{KindInternal, fmt.Sprintf("panic: %v (a bug in the connector)", p)}
		}
	}()
	switch req.Cmd {
	case "hello":
		return s.hello(req)
	case "connect":
		return s.connect(req)
	case "disconnect":
		name, err := req.Session()
		if err != nil {
			return nil, err
		}
		e, err := s.session(name)
		if err != nil {
			return nil, err
		}
		e.Close()
		delete(s.sessions, name)
		return struct{}{}, nil
	case "enqueue":
		return s.enqueue(req)
	case "browse":
		return s.browse(req)
	case "pending_size":
		return s.pendingSize(req)
	case "claim":
		return s.claim(req)
	case "complete":
		return s.complete(req)
	case "retry":
		return s.retry(req)
	case "promote":
		return s.promote(req)
	case "reap":
		return s.reap(req)
	case "pipeline_probe":
		return s.probe(req)
	case "batch":
		return s.batch(req)
	}
	return nil, &WireError{KindUnsupported, fmt.Sprintf("unknown cmd %q", req.Cmd)}
}

func (s *Server) session(name string) (*Engine, *WireError) {
	e, ok := s.sessions[name]
	if !ok {
		return nil, invalidf("unknown session %q", name)
	}
	return e, nil
}

func (s *Server) hello(req *Request) (interface{}, *WireError) {
	// Any protocol but the integer 1 (the string "1" included) is unsupported (R5.5, §7).
	raw, present := req.raw("protocol")
	if !present {
		return nil, invalidf("missing field protocol")
	}
	if p, err := parseIntLiteral(trimSpace(raw)); err != nil || p != wireProtocol {
		return nil, &WireError{KindUnsupported, fmt.Sprintf("wire protocol %s (this connector speaks %d)", string(raw), wireProtocol)}
	}
	shas := map[string]string{}
	for name, sc := range s.b.Scripts {
		shas[name] = sc.SHA
	}
	return map[string]interface{}{
		"name": connectorName, "version": connectorVersion, "language": "go",
		"bundle": s.b.Version, "scripts": shas,
	}, nil
}

func (s *Server) connect(req *Request) (interface{}, *WireError) {
	name, err := req.Session()
	if err != nil {
		return nil, err
	}
	url, err := req.String("url")
	if err != nil {
		return nil, err
	}
	cluster, err := req.OptBool("cluster")
	if err != nil {
		return nil, err
	}
	caFile, hasCA, err := req.OptString("ca_file")
	if err != nil {
		return nil, err
	}
	sentinel, err := req.OptSentinel()
	if err != nil {
		return nil, err
	}
	t, err := ParseTarget(url, cluster)
	if err != nil {
		return nil, err
	}
	// R11.1: behind Sentinel the url names the first Sentinel, its scheme, user, password and
	// database being the session's; the primary is found through the Sentinels at every connect.
	if sentinel != nil {
		if err := t.UseSentinel(sentinel); err != nil {
			return nil, err
		}
	}
	// R10.1: ca_file needs rediss://; it is read (and must hold a certificate) before anything is
	// dialled, so a bad one is invalid with nothing sent.
	if hasCA {
		if err := t.LoadCAFile(caFile); err != nil {
			return nil, err
		}
	}
	if old, ok := s.sessions[name]; ok {
		old.Close()
		delete(s.sessions, name)
	}
	e, err := Open(s.b, t, s.logf)
	if err != nil {
		return nil, err
	}
	s.sessions[name] = e
	return struct{}{}, nil
}

// queueVerb reads the fields every queue verb shares; extra validation happens before the session.
func (s *Server) queueVerb(req *Request, more func() *WireError) (*Engine, string, *WireError) {
	name, err := req.Session()
	if err != nil {
		return nil, "", err
	}
	q, err := req.Queue()
	if err != nil {
		return nil, "", err
	}
	if more != nil {
		if err := more(); err != nil {
			return nil, "", err
		}
	}
	e, err := s.session(name)
	if err != nil {
		return nil, "", err
	}
	return e, q, nil
}

func (s *Server) enqueue(req *Request) (interface{}, *WireError) {
	var payload string
	var delay int64
	e, q, err := s.queueVerb(req, func() (err *WireError) {
		if payload, err = req.String("payload"); err != nil {
			return err
		}
		delay, err = req.Int("delay_ms", 0, maxMs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return e.Enqueue(q, payload, delay)
}

func (s *Server) browse(req *Request) (interface{}, *WireError) {
	var offset, limit int64
	e, q, err := s.queueVerb(req, func() (err *WireError) {
		if offset, err = req.Int("offset", 0, maxInt32); err != nil {
			return err
		}
		limit, err = req.Int("limit", 0, maxInt32)
		return err
	})
	if err != nil {
		return nil, err
	}
	if limit == 0 {
		return []BrowsedJob{}, nil
	}
	return e.Browse(q, offset, limit)
}

func (s *Server) pendingSize(req *Request) (interface{}, *WireError) {
	e, q, err := s.queueVerb(req, nil)
	if err != nil {
		return nil, err
	}
	return e.PendingSize(q)
}

func (s *Server) claim(req *Request) (interface{}, *WireError) {
	var lease int64
	e, q, err := s.queueVerb(req, func() (err *WireError) {
		lease, err = req.Int("lease_ms", 0, maxMs)
		return err
	})
	if err != nil {
		return nil, err
	}
	c, err := e.Claim(q, lease)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, nil
	}
	return c, nil
}

func (s *Server) complete(req *Request) (interface{}, *WireError) {
	var id string
	var attempts int64
	e, q, err := s.queueVerb(req, func() (err *WireError) {
		if id, err = req.JobID(); err != nil {
			return err
		}
		attempts, err = req.Int("attempts", 0, maxInt32)
		return err
	})
	if err != nil {
		return nil, err
	}
	return e.Complete(q, id, attempts)
}

func (s *Server) retry(req *Request) (interface{}, *WireError) {
	var id string
	var attempts, backoff, maxAttempts int64
	e, q, err := s.queueVerb(req, func() (err *WireError) {
		if id, err = req.JobID(); err != nil {
			return err
		}
		if attempts, err = req.Int("attempts", 0, maxInt32); err != nil {
			return err
		}
		if backoff, err = req.Int("backoff_ms", 0, maxMs); err != nil {
			return err
		}
		maxAttempts, err = req.Int("max_attempts", 1, maxInt32)
		return err
	})
	if err != nil {
		return nil, err
	}
	return e.Retry(q, id, attempts, backoff, maxAttempts)
}

func (s *Server) promote(req *Request) (interface{}, *WireError) {
	var limit int64
	e, q, err := s.queueVerb(req, func() (err *WireError) {
		limit, err = req.Int("limit", 0, maxInt32)
		return err
	})
	if err != nil {
		return nil, err
	}
	return e.Promote(q, limit)
}

func (s *Server) reap(req *Request) (interface{}, *WireError) {
	var maxAttempts, limit int64
	e, q, err := s.queueVerb(req, func() (err *WireError) {
		if maxAttempts, err = req.Int("max_attempts", 1, maxInt32); err != nil {
			return err
		}
		limit, err = req.Int("limit", 0, maxInt32)
		return err
	})
	if err != nil {
		return nil, err
	}
	return e.Reap(q, maxAttempts, limit)
}

func (s *Server) probe(req *Request) (interface{}, *WireError) {
	name, err := req.Session()
	if err != nil {
		return nil, err
	}
	key, err := req.String("key")
	if err != nil {
		return nil, err
	}
	if err := CheckProbeKey(key); err != nil {
		return nil, err
	}
	n, err := req.Int("n", 1, maxProbeN)
	if err != nil {
		return nil, err
	}
	e, err := s.session(name)
	if err != nil {
		return nil, err
	}
	return e.Probe(key, n)
}

func (s *Server) batch(req *Request) (interface{}, *WireError) {
	var n, depth int64
	var payload string
	var queues []string
	e, q, err := s.queueVerb(req, func() (err *WireError) {
		if n, err = req.Int("n", 1, maxBatchN); err != nil {
			return err
		}
		if depth, err = req.Int("depth", 1, maxDepth); err != nil {
			return err
		}
		if payload, err = req.String("payload"); err != nil {
			return err
		}
		var present bool
		if queues, present, err = req.OptStrings("queues"); err != nil {
			return err
		}
		return checkQueues(req, queues, present)
	})
	if err != nil {
		return nil, err
	}
	if queues == nil {
		queues = []string{q}
	}
	return e.Batch(queues, n, depth, payload)
}

func checkQueues(req *Request, queues []string, present bool) *WireError {
	if !present {
		return nil
	}
	if len(queues) < 1 || len(queues) > maxQueues {
		return invalidf("queues must list 1 to %d queue names, got %d", maxQueues, len(queues))
	}
	for _, q := range queues {
		if err := CheckQueue(q); err != nil {
			return err
		}
	}
	q, _ := req.String("queue")
	if q != queues[0] {
		return invalidf("queue %q must equal queues[0] %q", q, queues[0])
	}
	return nil
}
