package web

import (
	"crypto/subtle"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/stepseq/stepseq/executor/engine"
)

// The page's buttons answer a gate: POST /answer, as JSON {step, approve,
// note}. Only a page the listener's token opened can: the guard in front
// checks the token (its cookie), and here the request must come from the
// page's own origin and carry the CSRF token the page was served with, which
// a page on another site cannot read.

// Gates answers a gate for the page: the engine's Approve or Reject, as the
// face web.
type Gates interface {
	Answer(a engine.GateAnswer, approve bool) (engine.Answered, error)
}

// CSRFHeader is the header a button's request carries the page's CSRF token in.
const CSRFHeader = "X-Stepseq-Csrf"

// maxAnswerBody bounds an answer's request: a step id and a note.
const maxAnswerBody = 16 << 10

// answerRequest is what a button sends.
type answerRequest struct {
	Step    string `json:"step"`
	Approve bool   `json:"approve"`
	Note    string `json:"note"`
}

// answerReply is what the page is told: the message, or the refusal's code
// and reason.
type answerReply struct {
	Message string `json:"message,omitempty"`
	Code    string `json:"code,omitempty"`
	Error   string `json:"error,omitempty"`
}

func (h *Handler) serveAnswer(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		reply(w, http.StatusMethodNotAllowed, answerReply{Code: "not_allowed", Error: "method not allowed: POST an answer"})
		return
	}
	if h.opt.Gates == nil || h.opt.CSRF == "" {
		reply(w, http.StatusForbidden, answerReply{Code: "not_allowed",
			Error: "this page answers no gate: it is served without the listener's token; answer with stepseq approve or reject"})
		return
	}
	if why := sameOrigin(r); why != "" {
		reply(w, http.StatusForbidden, answerReply{Code: "not_allowed", Error: why})
		return
	}
	if got := r.Header.Get(CSRFHeader); subtle.ConstantTimeCompare([]byte(got), []byte(h.opt.CSRF)) != 1 {
		reply(w, http.StatusForbidden, answerReply{Code: "not_allowed", Error: "no CSRF token, or a wrong one: answer from the page itself"})
		return
	}
	var req answerRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxAnswerBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		reply(w, http.StatusBadRequest, answerReply{Code: "invalid_params", Error: "want {step, approve, note} as JSON: " + err.Error()})
		return
	}
	got, err := h.opt.Gates.Answer(engine.GateAnswer{Step: req.Step, Note: req.Note, By: "page at " + remoteHost(r), Face: "web"}, req.Approve)
	if err != nil {
		status, code := refusalOf(err)
		reply(w, status, answerReply{Code: code, Error: err.Error()})
		return
	}
	reply(w, http.StatusOK, answerReply{Message: got.Message})
}

// sameOrigin says why r is not a request of the page's own origin; "" when it
// is. A browser's POST carries Origin; one from another site is refused, as
// is one with none.
func sameOrigin(r *http.Request) string {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return "a cross-site request (Sec-Fetch-Site: " + site + ")"
	}
	origin := r.Header.Get("Origin")
	u, err := url.Parse(origin)
	if origin == "" || err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) || u.Scheme != "http" && u.Scheme != "https" {
		return "Origin " + quote(origin) + " is not this page's own: answer from the page itself"
	}
	return ""
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// refusalOf is the status and code of an answer's refusal: the code is the
// engine's (engine.RefusalOf), the status the one HTTP gives it.
func refusalOf(err error) (int, string) {
	code := engine.RefusalOf(err).Code
	switch code {
	case engine.InvalidParams:
		return http.StatusBadRequest, string(code)
	case engine.NotFound:
		return http.StatusNotFound, string(code)
	case engine.NotAllowed:
		return http.StatusConflict, string(code)
	}
	return http.StatusServiceUnavailable, string(code)
}

func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func reply(w http.ResponseWriter, status int, v answerReply) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
