package listener

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/metrics"
)

const testToken = "0123456789abcdef-the-test-token"

// guarded serves ok at /mcp (guard.MCP), / and /events (guard.Page), and an
// open probe at /healthz, on a loopback port.
func guarded(t *testing.T, token string) (base string, reg *metrics.Registry) {
	t.Helper()
	reg = metrics.NewRegistry()
	g := NewGuard(token, reg)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok "+r.URL.Path)
		if Authenticated(r) {
			_, _ = io.WriteString(w, " with the token")
		}
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", g.MCP(ok))
	mux.Handle("/", g.Page(ok))
	mux.Handle("/healthz", ok)
	srv := &Server{Handler: mux}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Serve(ln)
	t.Cleanup(func() { _ = srv.Shutdown(t.Context()) })
	return "http://" + addr.String(), reg
}

type reply struct {
	code   int
	body   string
	header http.Header
}

func do(t *testing.T, c *http.Client, method, u string, hdr map[string]string) reply {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	if c == nil {
		c = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, string(b), resp.Header}
}

func denied(reg *metrics.Registry, face string) float64 {
	v, _ := reg.Value("stepseq_http_unauthorized_total", face)
	return v
}

// TestGuard_Token: with a token, /mcp wants Authorization: Bearer; the page and
// its stream take it too, or once as ?token= that leaves a cookie; a refusal
// is 401, counted by face; the probe stays open.
func TestGuard_Token(t *testing.T) {
	base, reg := guarded(t, testToken)
	bearer := map[string]string{"Authorization": "Bearer " + testToken}
	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		want       int
	}{
		{"mcp without a token", "/mcp", nil, 401},
		{"mcp with a wrong token", "/mcp", map[string]string{"Authorization": "Bearer " + testToken + "x"}, 401},
		{"mcp with a prefix of the token", "/mcp", map[string]string{"Authorization": "Bearer " + testToken[:20]}, 401},
		{"mcp with Basic", "/mcp", map[string]string{"Authorization": "Basic " + testToken}, 401},
		{"mcp with the token", "/mcp", bearer, 200},
		{"mcp with the scheme in lower case", "/mcp", map[string]string{"Authorization": "bearer " + testToken}, 200},
		{"page without a token", "/", nil, 401},
		{"events without a token", "/events", nil, 401},
		{"page with a wrong ?token=", "/?token=nope", nil, 401},
		{"page with the token", "/", bearer, 200},
		{"events with the token", "/events", bearer, 200},
		{"a probe without a token", "/healthz", nil, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, nil, http.MethodGet, base+tc.path, tc.hdr)
			if r.code != tc.want {
				t.Fatalf("%s = %d %q, want %d", tc.path, r.code, r.body, tc.want)
			}
			if r.code == 401 {
				if r.header.Get("WWW-Authenticate") != `Bearer realm="stepseq"` || !strings.Contains(r.body, "Authorization: Bearer TOKEN") {
					t.Errorf("401 without the how-to: %v %q", r.header, r.body)
				}
				if strings.Contains(r.body, testToken) {
					t.Error("the 401 shows the token")
				}
				var rpc struct {
					Error struct {
						Data struct{ Code string }
					}
				}
				if tc.path == "/mcp" && (json.Unmarshal([]byte(r.body), &rpc) != nil || rpc.Error.Data.Code != UnauthorizedCode) {
					t.Errorf("an MCP client's 401 is no JSON-RPC error with code %s: %q", UnauthorizedCode, r.body)
				}
			}
		})
	}
	if m, p, e := denied(reg, "mcp"), denied(reg, "page"), denied(reg, "events"); m != 4 || p != 2 || e != 1 {
		t.Errorf("stepseq_http_unauthorized_total: mcp %v page %v events %v, want 4 2 1", m, p, e)
	}
}

// TestGuard_PageCookie: /?token= sets an HttpOnly, SameSite=Strict cookie that
// is not the token, and sends the browser to the address without it; the
// cookie then opens the page and /events, never /mcp.
// TestGuard_Authenticated: what /mcp lets in on the token is marked so; with
// no token, nothing is.
func TestGuard_Authenticated(t *testing.T) {
	withToken, _ := guarded(t, testToken)
	if r := do(t, nil, http.MethodPost, withToken+"/mcp", map[string]string{"Authorization": "Bearer " + testToken}); r.body != "ok /mcp with the token" {
		t.Errorf("/mcp with the token: %d %q, want it marked", r.code, r.body)
	}
	open, _ := guarded(t, "")
	if r := do(t, nil, http.MethodPost, open+"/mcp", map[string]string{"Authorization": "Bearer " + testToken}); r.body != "ok /mcp" {
		t.Errorf("/mcp of a guard without a token: %d %q, want it unmarked", r.code, r.body)
	}
}

func TestGuard_PageCookie(t *testing.T) {
	base, reg := guarded(t, testToken)
	r := do(t, nil, http.MethodGet, base+"/?token="+url.QueryEscape(testToken)+"&x=1", nil)
	if r.code != http.StatusSeeOther || r.header.Get("Location") != "/?x=1" {
		t.Fatalf("/?token= = %d, Location %q; want 303 to /?x=1", r.code, r.header.Get("Location"))
	}
	sc := r.header.Get("Set-Cookie")
	for _, want := range []string{CookieName + "=", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(sc, want) {
			t.Errorf("Set-Cookie %q lacks %s", sc, want)
		}
	}
	if strings.Contains(sc, testToken) {
		t.Errorf("the cookie carries the token: %s", sc)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	if r := do(t, browser, http.MethodGet, base+"/?token="+url.QueryEscape(testToken), nil); r.code != 200 || r.body != "ok /" {
		t.Fatalf("following the redirect: %d %q", r.code, r.body)
	}
	if r := do(t, browser, http.MethodGet, base+"/events", nil); r.code != 200 {
		t.Fatalf("/events with the cookie = %d", r.code)
	}
	if r := do(t, browser, http.MethodGet, base+"/mcp", nil); r.code != 401 {
		t.Fatalf("/mcp with the page's cookie = %d, want 401", r.code)
	}
	forged := map[string]string{"Cookie": CookieName + "=" + testToken}
	if r := do(t, nil, http.MethodGet, base+"/", forged); r.code != 401 {
		t.Fatalf("a cookie holding the token itself = %d, want 401", r.code)
	}
	if p := denied(reg, "page"); p != 1 {
		t.Errorf("page refusals counted %v, want 1", p)
	}
}

// TestGuard_Host: a loopback listener answers only to a loopback name, on
// every face but the probes (DNS rebinding); without a token too.
func TestGuard_Host(t *testing.T) {
	base, _ := guarded(t, "")
	port := base[strings.LastIndexByte(base, ':')+1:]
	for _, tc := range []struct {
		host string
		want int
	}{
		{"attacker.example", 403},
		{"attacker.example:" + port, 403},
		{"127.0.0.1:" + port, 200},
		{"localhost:" + port, 200},
		{"localhost", 200},
		{"[::1]:" + port, 200},
	} {
		for _, path := range []string{"/mcp", "/", "/events"} {
			if r := do(t, nil, http.MethodGet, base+path, map[string]string{"Host": tc.host}); r.code != tc.want {
				t.Errorf("%s with Host %s = %d %q, want %d", path, tc.host, r.code, r.body, tc.want)
			}
		}
	}
	if r := do(t, nil, http.MethodGet, base+"/healthz", map[string]string{"Host": "attacker.example"}); r.code != 200 {
		t.Errorf("/healthz with a foreign Host = %d: probes stay open", r.code)
	}
}

// TestGuard_Origin: /mcp refuses a browser's cross-site request and takes its
// own origin and clients that send none.
func TestGuard_Origin(t *testing.T) {
	base, _ := guarded(t, "")
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"another site", map[string]string{"Origin": "http://evil.example"}, 403},
		{"another port", map[string]string{"Origin": "http://127.0.0.1:1"}, 403},
		{"a null origin", map[string]string{"Origin": "null"}, 403},
		{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"same-site fetch of another origin", map[string]string{"Sec-Fetch-Site": "same-site"}, 403},
		{"its own origin", map[string]string{"Origin": base, "Sec-Fetch-Site": "same-origin"}, 200},
		{"no origin (not a browser)", nil, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := do(t, nil, http.MethodPost, base+"/mcp", tc.hdr); r.code != tc.want {
				t.Fatalf("POST /mcp = %d %q, want %d", r.code, r.body, tc.want)
			}
		})
	}
}

// TestGuard_ValidToken: the comparison is of SHA-256 sums in constant time, so
// a token of another length, or one byte off at either end, is refused alike.
func TestGuard_ValidToken(t *testing.T) {
	g := NewGuard(testToken, nil)
	if !g.validToken(testToken) {
		t.Fatal("the token refused")
	}
	last := len(testToken) - 1
	for _, bad := range []string{"", testToken[:last], testToken + "0", "x" + testToken[1:], testToken[:last] + "x", strings.ToUpper(testToken)} {
		if g.validToken(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
	if (&Guard{}).validToken("") || NewGuard("", nil).has {
		t.Error("a guard without a token holds one")
	}
}

func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, short := write("good", testToken+"\n"), write("short", "abc\n")
	for _, tc := range []struct{ file, env, want, err string }{
		{"", "", "", ""},
		{good, "", testToken, ""},
		{"", "  " + testToken + " ", testToken, ""},
		{good, testToken, "", "both --token-file and STEPSEQ_TOKEN are set"},
		{short, "", "", "the token has 3 characters, want at least 16: make one with `head -c 32 /dev/urandom | base64 > token`"},
		{"", "abc", "", "STEPSEQ_TOKEN: the token has 3 characters"},
		{"", "0123456789 abcdef", "", "white space"},
		{filepath.Join(dir, "none"), "", "", "--token-file: open"},
	} {
		got, err := ReadToken(tc.file, tc.env)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ReadToken(%q, %q) err = %v, want %q", tc.file, tc.env, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ReadToken(%q, %q) = %q, %v; want %q", tc.file, tc.env, got, err, tc.want)
		}
	}
}

// TestCheckExposure judges addresses bound, never names: every interface and
// a public address need the token, loopback's do not.
func TestCheckExposure(t *testing.T) {
	for _, tc := range []struct {
		addr     net.Addr
		loopback bool
	}{
		{&net.TCPAddr{Port: 8080}, false}, {&net.TCPAddr{IP: net.IPv4zero, Port: 8080}, false},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, false}, {&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 80}, false},
		{reportedAddr("192.0.2.7:80"), false}, {reportedAddr("localhost:80"), false},
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, true}, {&net.TCPAddr{IP: net.IPv4(127, 9, 9, 9), Port: 1}, true},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 8080}, true}, {reportedAddr("127.0.0.1:80"), true},
	} {
		if got := Loopback(tc.addr); got != tc.loopback {
			t.Errorf("Loopback(%v) = %v", tc.addr, got)
		}
		err := CheckExposure("name:8080", tc.addr, "", false)
		if tc.loopback != (err == nil) {
			t.Errorf("CheckExposure(%v) = %v", tc.addr, err)
		}
		if err != nil && (!strings.Contains(err.Error(), "--token-file") || !strings.Contains(err.Error(), "--listen name:8080 serves beyond loopback") ||
			!strings.Contains(err.Error(), tc.addr.String())) {
			t.Errorf("CheckExposure(%v) does not say what and how: %v", tc.addr, err)
		}
		if CheckExposure("name:8080", tc.addr, testToken, false) != nil || CheckExposure("name:8080", tc.addr, "", true) != nil {
			t.Errorf("%v refused with a token, or with --insecure-listen", tc.addr)
		}
	}
}

// reportedAddr is an address as a listener reports it, of no net type.
type reportedAddr string

func (a reportedAddr) Network() string { return "tcp" }
func (a reportedAddr) String() string  { return string(a) }
