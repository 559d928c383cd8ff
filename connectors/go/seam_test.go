package main

// The seam (SPEC R4.15): seam.go alone imports the Redis client (redigo, redisc) and alone spells
// the emq: key schema; and it uses none of the client features SPEC forbids (README.md says why).

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const seamFile = "seam.go"

var clientImports = []string{"github.com/gomodule/redigo", "github.com/mna/redisc"}

func goFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files found: %v", err)
	}
	return files
}

func parseFile(t *testing.T, path string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	return f
}

func TestSeamOnlySeamImportsTheClient(t *testing.T) {
	importers := 0
	for _, path := range goFiles(t) {
		for _, imp := range parseFile(t, path).Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, c := range clientImports {
				if p == c || strings.HasPrefix(p, c+"/") {
					if path != seamFile {
						t.Errorf("%s imports %s: only %s may talk to Redis", path, p, seamFile)
					} else {
						importers++
					}
				}
			}
		}
	}
	if importers == 0 {
		t.Errorf("%s imports no Redis client: the seam moved?", seamFile)
	}
}

func TestSeamOnlySeamSpellsTheKeySchema(t *testing.T) {
	for _, path := range goFiles(t) {
		if path == seamFile || strings.HasSuffix(path, "_test.go") {
			continue
		}
		ast.Inspect(parseFile(t, path), func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && strings.Contains(strings.ToLower(s), "emq:") {
					t.Errorf("%s: string %s names an EchoMQ key: only %s owns the key schema", path, lit.Value, seamFile)
				}
			}
			return true
		})
	}
}

// Client features that re-send, re-dial or EVAL behind the caller's back (R4.9, R4.16).
var forbidden = map[string]string{
	"redis.Pool":              "a pool re-dials on Get (redigo pool.go), a silent reconnect without the fence",
	"redis.NewScript":         "redis.Script.Do falls back to EVAL on NOSCRIPT (redigo script.go:67-70)",
	"redis.DialURL":           "DialURL accepts url forms SPEC refuses (a query, a bad /db); ParseTarget owns the url",
	"redis.DialTLSSkipVerify": "verification is never switched off (R10.3, R10.4)",
	"redisc.RetryConn":        "RetryConn closes and re-dials connections on redirects (redisc retry_conn.go)",
	"redisc.Cluster":          "a Cluster re-dials per command and refreshes in a background goroutine (redisc cluster.go)",
	"redisc.BindConn":         "needs a redisc.Cluster (see above)",
	"redisc.ReadOnlyConn":     "never read from a replica (R8.1)",
}

func TestSeamUsesNoForbiddenClientFeature(t *testing.T) {
	for _, path := range goFiles(t) {
		ast.Inspect(parseFile(t, path), func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok {
				if why, bad := forbidden[id.Name+"."+sel.Sel.Name]; bad {
					t.Errorf("%s uses %s.%s: %s", path, id.Name, sel.Sel.Name, why)
				}
			}
			return true
		})
	}
}

func TestSeamNeverSendsEVAL(t *testing.T) {
	for _, path := range goFiles(t) {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		ast.Inspect(parseFile(t, path), func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, _ := strconv.Unquote(lit.Value); strings.EqualFold(s, "EVAL") || strings.EqualFold(s, "READONLY") {
					t.Errorf("%s: %s is never sent (R4.9, R8.1)", path, lit.Value)
				}
			}
			return true
		})
	}
}

func TestSeamFileExists(t *testing.T) {
	if _, err := os.Stat(seamFile); err != nil {
		t.Fatal(err)
	}
}

// TLS options live in the seam too (R4.15, SPEC §10): only seam.go imports crypto/tls and
// crypto/x509 (tests aside), and no source file names a way to skip verification (tls_test.go
// reads InsecureSkipVerify only to check that it is false).
func TestSeamOwnsTLSAndNeverSkipsVerification(t *testing.T) {
	for _, path := range goFiles(t) {
		f := parseFile(t, path)
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		if path != seamFile {
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == "crypto/tls" || p == "crypto/x509" {
					t.Errorf("%s imports %s: TLS options belong in %s", path, p, seamFile)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				switch id.Name {
				case "InsecureSkipVerify", "DialTLSSkipVerify":
					t.Errorf("%s names %s: certificate verification is never switched off", path, id.Name)
				}
			}
			return true
		})
	}
}
