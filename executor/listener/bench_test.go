package listener

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// What a valid token adds to a request: the guard in front of a handler that
// does nothing, so all the time is the guard's (the Host and Origin checks,
// the header's parse, the SHA-256 and the constant-time comparison).
func benchGuard(b *testing.B, wrap func(*Guard, http.Handler) http.Handler, req *http.Request) {
	g := NewGuard(testToken, nil)
	h := wrap(g, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	rec := httptest.NewRecorder()
	for b.Loop() {
		h.ServeHTTP(rec, req)
	}
	if rec.Code != http.StatusOK {
		b.Fatalf("refused: %d %s", rec.Code, rec.Body)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "µs-added/request")
}

func BenchmarkGuard_MCPBearer(b *testing.B) {
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Origin", "http://127.0.0.1:8080")
	req.Host = "127.0.0.1:8080"
	benchGuard(b, (*Guard).MCP, req)
}

func BenchmarkGuard_PageCookie(b *testing.B) {
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/", nil)
	req.AddCookie(&http.Cookie{Name: CookieName, Value: NewGuard(testToken, nil).cookie})
	benchGuard(b, (*Guard).Page, req)
}

func BenchmarkGuard_PageBearer(b *testing.B) {
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	benchGuard(b, (*Guard).Page, req)
}

// A wrong token costs what a right one does: the comparison is of two
// SHA-256 sums, whatever the presented token's length or first wrong byte.
func BenchmarkGuard_WrongToken(b *testing.B) {
	g := NewGuard(testToken, nil)
	for _, bad := range []struct{ name, tok string }{
		{"first-byte", "x" + testToken[1:]},
		{"last-byte", testToken[:len(testToken)-1] + "x"},
		{"short", "x"},
	} {
		b.Run(bad.name, func(b *testing.B) {
			for b.Loop() {
				if g.validToken(bad.tok) {
					b.Fatal("accepted")
				}
			}
		})
	}
}
