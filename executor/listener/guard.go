// Package listener is the door of `watch --listen`: who may come
// in and how much each may take. It checks the token (Authorization: Bearer,
// or the page's cookie), the Host a loopback listener is reached by (DNS
// rebinding) and the Origin of MCP requests (cross-site browsers), and it
// bounds connections, request bodies and the time they take. It knows no
// plan, no page and no tool: the handlers it guards are given to it.
package listener

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/stepseq/stepseq/executor/metrics"
)

// MinTokenLen is the shortest token taken: a guessable one guards nothing.
const MinTokenLen = 16

// CookieName is the page's cookie, set once the page was opened with ?token=.
const CookieName = "stepseq_page"

// tokenHowTo says how to make and give a token.
const tokenHowTo = "make one with `head -c 32 /dev/urandom | base64 > token` and give it with --token-file token or STEPSEQ_TOKEN"

// ReadToken is the token of --token-file (its content, white space trimmed) or
// of STEPSEQ_TOKEN; "" when neither is given. Both at once, an empty or a
// short token are errors that say what to do.
func ReadToken(file, env string) (string, error) {
	token, from := strings.TrimSpace(env), "STEPSEQ_TOKEN"
	if file != "" {
		if env != "" {
			return "", errors.New("both --token-file and STEPSEQ_TOKEN are set: give the token one way")
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		token, from = strings.TrimSpace(string(data)), "--token-file "+file
	} else if env == "" {
		return "", nil
	}
	if len(token) < MinTokenLen {
		return "", fmt.Errorf("%s: the token has %d characters, want at least %d: %s", from, len(token), MinTokenLen, tokenHowTo)
	}
	if strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return "", fmt.Errorf("%s: the token holds white space or a control character: %s", from, tokenHowTo)
	}
	return token, nil
}

// Loopback reports whether a bound address serves the loopback interface
// only: 127.0.0.0/8 or ::1. It judges an address, never a name: "localhost"
// is loopback only if it resolved to one, and the unspecified address (":8080")
// is every interface.
func Loopback(bound net.Addr) bool {
	if a, ok := bound.(*net.TCPAddr); ok {
		return a.IP.IsLoopback()
	}
	host, _, err := net.SplitHostPort(bound.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackHost reports whether a Host (a name a client gave, or a local
// address) is loopback's: localhost, a name under .localhost, or a loopback IP.
func loopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// CheckExposure refuses to serve --listen listen, at the address bound (or
// about to be), beyond loopback without a token, unless insecure
// (--insecure-listen) says so; the error says how.
func CheckExposure(listen string, bound net.Addr, token string, insecure bool) error {
	if token != "" || insecure || Loopback(bound) {
		return nil
	}
	return fmt.Errorf("--listen %s serves beyond loopback without a token (it binds %s): anyone who reaches it could hand stepseq a plan and run a program. "+
		"Give a token (%s), listen on 127.0.0.1 only, or pass --insecure-listen to serve without one", listen, bound, tokenHowTo)
}

// Guard checks who a request comes from. The zero Guard (no token) lets every
// client in, still checking Host and Origin.
type Guard struct {
	token  [sha256.Size]byte // SHA-256 of the token: compared in constant time, whatever the length
	has    bool
	cookie string // the page cookie's value: an HMAC of the token, never the token itself
	denied *metrics.CounterVec
}

// NewGuard guards with token ("" for none); refused requests are counted on
// reg (nil: not counted) as stepseq_http_unauthorized_total{face}.
func NewGuard(token string, reg *metrics.Registry) *Guard {
	g := &Guard{}
	if token != "" {
		g.token, g.has = sha256.Sum256([]byte(token)), true
		mac := hmac.New(sha256.New, []byte(token))
		_, _ = io.WriteString(mac, "stepseq page cookie")
		g.cookie = hex.EncodeToString(mac.Sum(nil))
	}
	g.denied = metrics.NewCounterVec(metrics.Opts{Name: "stepseq_http_unauthorized_total",
		Help: "Requests refused with 401 for a missing or wrong token, by face (mcp, page, events)."}, []string{"face"})
	if reg != nil {
		g.denied = metrics.Registered(reg, g.denied)
	}
	return g
}

// validToken compares a presented token with the guard's in constant time.
func (g *Guard) validToken(presented string) bool {
	sum := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(sum[:], g.token[:]) == 1
}

// bearer is the token of an Authorization: Bearer header; ok is false without one.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// UnauthorizedCode is the refusal code a refused MCP client reads in the 401's
// JSON-RPC error (the refusal code unauthorized; the MCP server's list names it too).
const UnauthorizedCode = "unauthorized"

func (g *Guard) refuse(w http.ResponseWriter, face, why string) {
	g.denied.WithLabelValues(face).Inc()
	w.Header().Set("WWW-Authenticate", `Bearer realm="stepseq"`)
	w.Header().Set("Cache-Control", "no-store")
	msg := why + ": send Authorization: Bearer TOKEN (the token of --token-file or STEPSEQ_TOKEN); for the page, open it once as /?token=TOKEN"
	if face != "mcp" {
		http.Error(w, msg, http.StatusUnauthorized)
		return
	}
	// An MCP client reads a JSON-RPC error, with the code to branch on.
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{
		"code": -32001, "message": UnauthorizedCode + ": " + msg,
		"data": map[string]any{"code": UnauthorizedCode, "reasons": []string{msg}}}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write(append(body, '\n'))
}

// MCP guards the MCP endpoint: the Host on a loopback listener, the Origin of
// a browser's request, and, with a token, Authorization: Bearer.
func (g *Guard) MCP(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(w, r) || !originAllowed(w, r) {
			return
		}
		if g.has {
			tok, ok := bearer(r)
			if !ok {
				g.refuse(w, "mcp", "no token")
				return
			}
			if !g.validToken(tok) {
				g.refuse(w, "mcp", "wrong token")
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), authenticatedKey{}, true))
		}
		h.ServeHTTP(w, r)
	})
}

type authenticatedKey struct{}

// Authenticated reports whether a guard let r in on its token: false when the
// guard has none. The MCP server bounds the sessions of such clients apart.
func Authenticated(r *http.Request) bool {
	ok, _ := r.Context().Value(authenticatedKey{}).(bool)
	return ok
}

// Page guards the live page and its event stream: the Host on a loopback
// listener and, with a token, Authorization: Bearer or the page's cookie. A
// page opened as /?token=TOKEN sets the cookie (HttpOnly, SameSite=Strict) and
// is sent to its address without the token, which leaves the address bar and
// the history.
func (g *Guard) Page(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(w, r) {
			return
		}
		if !g.has {
			h.ServeHTTP(w, r)
			return
		}
		face := "page"
		if r.URL.Path == "/events" {
			face = "events"
		}
		if tok, ok := bearer(r); ok {
			if !g.validToken(tok) {
				g.refuse(w, face, "wrong token")
				return
			}
			h.ServeHTTP(w, r)
			return
		}
		if q := r.URL.Query(); q.Has("token") {
			if !g.validToken(q.Get("token")) {
				g.refuse(w, face, "wrong token")
				return
			}
			http.SetCookie(w, &http.Cookie{Name: CookieName, Value: g.cookie, Path: "/", HttpOnly: true,
				SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			q.Del("token")
			u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("Referrer-Policy", "no-referrer")
			http.Redirect(w, r, u.String(), http.StatusSeeOther)
			return
		}
		c, err := r.Cookie(CookieName)
		if err != nil {
			g.refuse(w, face, "no token")
			return
		}
		if subtle.ConstantTimeCompare([]byte(c.Value), []byte(g.cookie)) != 1 {
			g.refuse(w, face, "wrong token")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// hostAllowed refuses, with 403, a request that reached a loopback listener
// under a name that is not loopback's: a page elsewhere that made its name
// resolve to 127.0.0.1 (DNS rebinding) reads nothing.
func hostAllowed(w http.ResponseWriter, r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil {
		return true
	}
	lhost, _, err := net.SplitHostPort(local.String())
	if err != nil || !loopbackHost(lhost) {
		return true
	}
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	if loopbackHost(host) {
		return true
	}
	http.Error(w, fmt.Sprintf("forbidden: this listener is on loopback and answers only to a loopback name, not Host %q", r.Host), http.StatusForbidden)
	return false
}

// originAllowed refuses, with 403, a browser's cross-origin request: one whose
// Origin is not the server's own (the Host it was sent to), or that the browser
// marks as from another site.
func originAllowed(w http.ResponseWriter, r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		http.Error(w, "forbidden: a cross-site request (Sec-Fetch-Site: "+site+")", http.StatusForbidden)
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // not a browser's cross-origin request
	}
	u, err := url.Parse(origin)
	if err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host) && (u.Scheme == "http" || u.Scheme == "https") {
		return true
	}
	http.Error(w, fmt.Sprintf("forbidden: Origin %q is not this server's own", origin), http.StatusForbidden)
	return false
}
