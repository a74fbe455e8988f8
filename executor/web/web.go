package web

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"net/http"
	"sync"
	"time"
)

// Defaults of [Options].
const (
	DefaultMaxClients   = 16
	DefaultHeartbeat    = 15 * time.Second
	DefaultMinInterval  = 250 * time.Millisecond
	DefaultRefresh      = 2 * time.Second
	DefaultLogTailBytes = 4 << 10
	DefaultWriteTimeout = 10 * time.Second
)

// Options tune the page. The zero value takes the defaults.
type Options struct {
	// MaxClients bounds the event streams open at once; one more is refused
	// with 503, and that page stays as it was loaded.
	MaxClients int
	// Heartbeat is how often an idle stream gets a comment, so that proxies
	// keep it open and a client that went away is noticed.
	Heartbeat time.Duration
	// MinInterval is the least time between two updates on one stream: the
	// changes in between are sent as one.
	MinInterval time.Duration
	// Refresh is how often, while a step runs, the view is read again without
	// a change, for what changes unannounced (log tails). Negative: never.
	Refresh time.Duration
	// LogTailBytes is the most of each step's log the page shows.
	LogTailBytes int
	// WriteTimeout closes a stream whose client does not take an update in
	// that time.
	WriteTimeout time.Duration
	// Gates answers a gate from the page's buttons (POST /answer), and CSRF
	// is the token each answer must carry, served in the page. Set both only
	// behind the listener's token: without them the page shows the commands
	// that answer instead of buttons.
	Gates Gates
	CSRF  string
}

func (o Options) withDefaults() Options {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if o.MaxClients <= 0 {
		o.MaxClients = DefaultMaxClients
	}
	if o.LogTailBytes <= 0 {
		o.LogTailBytes = DefaultLogTailBytes
	}
	def(&o.Heartbeat, DefaultHeartbeat)
	def(&o.MinInterval, DefaultMinInterval)
	def(&o.Refresh, DefaultRefresh)
	def(&o.WriteTimeout, DefaultWriteTimeout)
	return o
}

var (
	//go:embed page.html
	pageHTML string
	//go:embed live.js
	liveJS string

	// tmpl is the page's templates, parsed on first use: every stepseq
	// command links this package, and only the live page needs them.
	tmpl = sync.OnceValue(func() *template.Template {
		return template.Must(template.New("page").Funcs(template.FuncMap{
			"add": func(a, b int) int { return a + b },
		}).Parse(pageHTML))
	})

	// contentPolicy lets the page run its own script and nothing else: a
	// step id or a log line that got past escaping still could not run.
	contentPolicy = sync.OnceValue(func() string {
		sum := sha256.Sum256([]byte(liveJS))
		return fmt.Sprintf("default-src 'none'; script-src 'sha256-%s'; style-src 'unsafe-inline'; "+
			"connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
			base64.StdEncoding.EncodeToString(sum[:]))
	})
)

// pageData is what the templates execute on.
type pageData struct {
	Page   page
	Script template.JS
	CSRF   string // the page's CSRF token for its buttons; "" without
}

// Handler serves the page at / and its event stream at /events, relative to
// where it is mounted. Its only goroutines are the requests'.
type Handler struct {
	src Source
	opt Options

	renderMu sync.Mutex
	last     rendered // the streams' newest update, under renderMu

	mu      sync.Mutex
	clients int
	closed  bool
	streams sync.WaitGroup
	done    chan struct{}
}

// New serves src's views. Mount it at / (or under a prefix, with
// http.StripPrefix); it answers 404 for paths other than /, /events and
// /answer (the buttons of a gate).
// Close it before shutting the server down: event streams never end by
// themselves.
func New(src Source, opt Options) *Handler {
	return &Handler{src: src, opt: opt.withDefaults(), done: make(chan struct{})}
}

// Close ends every event stream, waits for them to return, and refuses new
// ones; the page itself is still served. It suits http.Server.RegisterOnShutdown.
func (h *Handler) Close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
	h.mu.Unlock()
	h.streams.Wait()
}

// ServeHTTP serves the page and the event stream.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/", "":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.servePage(w, r)
	case "/answer":
		h.serveAnswer(w, r)
	case "/events":
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.serveEvents(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (h *Handler) servePage(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	buf.Grow(64 << 10)
	data := pageData{Page: h.page(h.src.View()), Script: template.JS(liveJS)}
	if data.Page.Buttons {
		data.CSRF = h.opt.CSRF
	}
	if err := tmpl().ExecuteTemplate(&buf, "page", data); err != nil {
		http.Error(w, "render the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Security-Policy", contentPolicy())
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(buf.Bytes())
}

// page is what the template renders of v.
func (h *Handler) page(v View) page {
	p := newPage(v, time.Now(), h.opt.LogTailBytes)
	p.Buttons = h.opt.Gates != nil && h.opt.CSRF != ""
	return p
}

// fragment renders the part of the page that updates, for the event stream.
func (h *Handler) fragment(v View) (html, title string, running bool, err error) {
	p := h.page(v)
	var buf bytes.Buffer
	buf.Grow(32<<10 + len(p.Steps)*(1<<10+h.opt.LogTailBytes))
	if err := tmpl().ExecuteTemplate(&buf, "live", pageData{Page: p}); err != nil {
		return "", "", false, err
	}
	for _, s := range v.Steps {
		running = running || s.Running
	}
	return buf.String(), p.Title, running, nil
}
