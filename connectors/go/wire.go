package main

// Wire protocol v1 (SPEC §5): one JSON request per line on stdin, one JSON response per request on
// stdout, in order, echoing seq. This file parses requests and checks their fields (SPEC §4, §7);
// nothing here talks to the engine.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
)

// Error kinds (SPEC §5).
const (
	KindFence       = "fence"
	KindInvalid     = "invalid"
	KindEngine      = "engine"
	KindUnsupported = "unsupported"
	KindInternal    = "internal"
)

// Limits (SPEC R4.1–R4.6).
const (
	maxMs        = 1_000_000_000_000
	maxInt32     = 2_147_483_647
	maxProbeN    = 1_000_000
	maxBatchN    = 10_000_000
	maxDepth     = 100_000
	maxQueues    = 64
	maxQueueName = 128

	maxResponseLine = 16 << 20 // R5.11: a response line is at most 16 MiB, its \n not counted
)

// WireError is a failure with the kind the wire reports.
type WireError struct {
	Kind string
	Msg  string
}

func (e *WireError) Error() string { return e.Kind + ": " + e.Msg }

func invalidf(format string, a ...interface{}) *WireError {
	return &WireError{KindInvalid, fmt.Sprintf(format, a...)}
}

func enginef(format string, a ...interface{}) *WireError {
	return &WireError{KindEngine, fmt.Sprintf(format, a...)}
}

var (
	queueRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)
	jobIDRe = regexp.MustCompile(`^j[0-9]{16}$`)
)

// Request is one parsed request line.
type Request struct {
	Seq    json.RawMessage // echoed as is; "null" when it could not be read
	Cmd    string
	Fields map[string]json.RawMessage
}

var nullSeq = json.RawMessage("null")

// ParseRequest parses one line. On failure the returned request still carries the seq it could read.
func ParseRequest(line []byte) (*Request, *WireError) {
	req := &Request{Seq: nullSeq}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil || fields == nil {
		return req, invalidf("the line is not a JSON object")
	}
	req.Fields = fields
	if s, ok := fields["seq"]; ok {
		var v interface{}
		if json.Unmarshal(s, &v) == nil {
			var buf bytes.Buffer
			if json.Compact(&buf, s) == nil {
				req.Seq = json.RawMessage(buf.Bytes())
			}
		}
	}
	c, ok := fields["cmd"]
	if !ok {
		return req, invalidf("the request has no cmd")
	}
	if err := json.Unmarshal(c, &req.Cmd); err != nil {
		return req, invalidf("cmd must be a string")
	}
	return req, nil
}

func (r *Request) raw(name string) (json.RawMessage, bool) {
	v, ok := r.Fields[name]
	if !ok || isNull(v) {
		return nil, false
	}
	return v, true
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// String reads a required string field.
func (r *Request) String(name string) (string, *WireError) {
	v, ok := r.raw(name)
	if !ok {
		return "", invalidf("missing field %s", name)
	}
	var s string
	if bytes.TrimSpace(v)[0] != '"' || json.Unmarshal(v, &s) != nil {
		return "", invalidf("%s must be a string", name)
	}
	return s, nil
}

// Int reads a required integer field in lo..=hi. Only a JSON integer literal counts: a string, a
// fraction (also 5.0), an exponent, a boolean or a number out of range is invalid (SPEC §7).
func (r *Request) Int(name string, lo, hi int64) (int64, *WireError) {
	v, ok := r.raw(name)
	if !ok {
		return 0, invalidf("missing field %s", name)
	}
	n, err := parseIntLiteral(bytes.TrimSpace(v))
	if err != nil {
		return 0, invalidf("%s must be an integer in %d..=%d, got %s", name, lo, hi, string(v))
	}
	if n < lo || n > hi {
		return 0, invalidf("%s must be in %d..=%d, got %d", name, lo, hi, n)
	}
	return n, nil
}

func parseIntLiteral(b []byte) (int64, error) {
	if len(b) == 0 {
		return 0, fmt.Errorf("empty")
	}
	for i, c := range b {
		if !(c >= '0' && c <= '9') && !(i == 0 && c == '-') {
			return 0, fmt.Errorf("not an integer literal")
		}
	}
	return strconv.ParseInt(string(b), 10, 64)
}

// OptBool reads an optional boolean (absent or null: false).
func (r *Request) OptBool(name string) (bool, *WireError) {
	v, ok := r.raw(name)
	if !ok {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return false, invalidf("%s must be a boolean", name)
	}
	return b, nil
}

// OptString reads an optional string (absent or null: "", false).
func (r *Request) OptString(name string) (string, bool, *WireError) {
	v, ok := r.raw(name)
	if !ok {
		return "", false, nil
	}
	var s string
	if bytes.TrimSpace(v)[0] != '"' || json.Unmarshal(v, &s) != nil {
		return "", true, invalidf("%s must be a string", name)
	}
	return s, true, nil
}

// OptStrings reads an optional array of strings: absent is (nil, false); null is invalid, the
// field is absent or a list (§7).
func (r *Request) OptStrings(name string) ([]string, bool, *WireError) {
	v, ok := r.Fields[name]
	if !ok {
		return nil, false, nil
	}
	if isNull(v) {
		return nil, true, invalidf("%s must be a list of queue names when present, got null", name)
	}
	var raws []json.RawMessage
	if bytes.TrimSpace(v)[0] != '[' || json.Unmarshal(v, &raws) != nil {
		return nil, true, invalidf("%s must be an array of strings", name)
	}
	out := make([]string, len(raws))
	for i, e := range raws {
		if len(bytes.TrimSpace(e)) == 0 || bytes.TrimSpace(e)[0] != '"' || json.Unmarshal(e, &out[i]) != nil {
			return nil, true, invalidf("%s[%d] must be a string", name, i)
		}
	}
	return out, true, nil
}

// SentinelField is connect's sentinel (R11.1): the name the Sentinels monitor the primary by and
// every Sentinel's host:port, in the order to ask them.
type SentinelField struct {
	Name  string
	Nodes []string
}

// OptSentinel reads connect's optional sentinel field (absent or null: nil, SPEC §7). Present, it
// must be an object with a non-empty string name and a non-empty array nodes of host:port
// strings (a non-empty host, a decimal port in 1..=65535); otherwise invalid, before anything is
// dialled. Unknown members are ignored, as unknown request fields are.
func (r *Request) OptSentinel() (*SentinelField, *WireError) {
	v, ok := r.raw("sentinel")
	if !ok {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if bytes.TrimSpace(v)[0] != '{' || json.Unmarshal(v, &obj) != nil {
		return nil, invalidf("sentinel must be an object {\"name\": ..., \"nodes\": [\"host:port\", ...]}")
	}
	sub := &Request{Fields: obj}
	name, err := sub.String("name")
	if err != nil {
		return nil, invalidf("sentinel: %s", err.Msg)
	}
	if name == "" {
		return nil, invalidf("sentinel: name must be a non-empty string")
	}
	rawNodes, ok := obj["nodes"]
	if !ok || isNull(rawNodes) {
		return nil, invalidf("sentinel: missing field nodes")
	}
	var raws []json.RawMessage
	if bytes.TrimSpace(rawNodes)[0] != '[' || json.Unmarshal(rawNodes, &raws) != nil {
		return nil, invalidf("sentinel: nodes must be an array of \"host:port\" strings")
	}
	if len(raws) == 0 {
		return nil, invalidf("sentinel: nodes must name at least one Sentinel")
	}
	nodes := make([]string, len(raws))
	for i, e := range raws {
		if len(bytes.TrimSpace(e)) == 0 || bytes.TrimSpace(e)[0] != '"' || json.Unmarshal(e, &nodes[i]) != nil {
			return nil, invalidf("sentinel: nodes[%d] must be a \"host:port\" string", i)
		}
		if err := checkHostPort(nodes[i]); err != nil {
			return nil, invalidf("sentinel: nodes[%d] %q: %s", i, nodes[i], err.Msg)
		}
	}
	return &SentinelField{Name: name, Nodes: nodes}, nil
}

// checkHostPort accepts host:port ([v6]:port too) with a non-empty host and a port of decimal
// digits only in 1..=65535.
func checkHostPort(s string) *WireError {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return invalidf("must be host:port")
	}
	if host == "" || strings.ContainsAny(host, " \t\r\n/@?#") {
		return invalidf("has no valid host")
	}
	if port == "" || strings.Trim(port, "0123456789") != "" {
		return invalidf("port must be decimal")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return invalidf("port must be in 1..=65535")
	}
	return nil
}

// Session reads the session name: a non-empty string (SPEC §7).
func (r *Request) Session() (string, *WireError) {
	s, err := r.String("session")
	if err != nil {
		return "", err
	}
	if s == "" {
		return "", invalidf("session must be a non-empty string")
	}
	return s, nil
}

// CheckQueue applies R1.1.
func CheckQueue(q string) *WireError {
	if !queueRe.MatchString(q) {
		return invalidf("queue name %q must be 1-%d chars of [A-Za-z0-9._-]", q, maxQueueName)
	}
	return nil
}

// Queue reads and checks the queue field.
func (r *Request) Queue() (string, *WireError) {
	q, err := r.String("queue")
	if err != nil {
		return "", err
	}
	return q, CheckQueue(q)
}

// JobID reads and checks an id (R4.5).
func (r *Request) JobID() (string, *WireError) {
	id, err := r.String("id")
	if err != nil {
		return "", err
	}
	if !jobIDRe.MatchString(id) {
		return "", invalidf("id %q must match ^j[0-9]{16}$", id)
	}
	return id, nil
}

// Response encoding. ok values are encoded by encoding/json; a nil ok is JSON null.

func encodeOK(seq json.RawMessage, ok interface{}) []byte {
	v, err := json.Marshal(ok)
	if err != nil {
		return encodeErr(seq, &WireError{KindInternal, "cannot encode the reply: " + err.Error()})
	}
	return join(`{"seq":`, seq, `,"ok":`, v, "}\n")
}

// encodeReply encodes an ok value, or, when its line would pass R5.11's limit (a connector
// failure), an error of kind internal that says so.
func encodeReply(seq json.RawMessage, cmd string, ok interface{}) []byte {
	out := encodeOK(seq, ok)
	if len(out)-1 > maxResponseLine {
		return encodeErr(seq, &WireError{KindInternal, fmt.Sprintf(
			"the %s reply would be a %d-byte line, over the wire's %d-byte limit (R5.11)", cmd, len(out)-1, maxResponseLine)})
	}
	return out
}

func encodeErr(seq json.RawMessage, e *WireError) []byte {
	v, _ := json.Marshal(map[string]string{"kind": e.Kind, "message": e.Msg})
	return join(`{"seq":`, seq, `,"error":`, v, "}\n")
}

func join(parts ...interface{}) []byte {
	var b bytes.Buffer
	for _, p := range parts {
		switch x := p.(type) {
		case string:
			b.WriteString(x)
		case json.RawMessage:
			b.Write(x)
		case []byte:
			b.Write(x)
		}
	}
	return b.Bytes()
}
