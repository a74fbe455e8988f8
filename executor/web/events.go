package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"html"
	"net/http"
	"time"
)

// join counts a new stream in, unless there are as many as allowed or the
// handler is closed.
func (h *Handler) join() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.clients >= h.opt.MaxClients {
		return false
	}
	h.clients++
	h.streams.Add(1)
	return true
}

func (h *Handler) leave() {
	h.mu.Lock()
	h.clients--
	h.mu.Unlock()
	h.streams.Done()
}

// serveEvents streams the page's changing part as "view" events, each a JSON
// object {html, title}: one at once, then one after each change of the source
// (at most one per MinInterval), and while a step runs one per Refresh.
// Identical updates are not sent twice. It returns when the client goes, the
// handler closes, or a write fails or times out.
func (h *Handler) serveEvents(w http.ResponseWriter, r *http.Request) {
	if !h.join() {
		// The connection goes too: a refused client keeps no descriptor.
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "30")
		http.Error(w, "too many live pages open; this one will not update", http.StatusServiceUnavailable)
		return
	}
	defer h.leave()
	es := h.openStream(w)
	defer es.close()
	if es.write([]byte("retry: 2000\n\n")) != nil || es.send() != nil {
		return
	}
	heartbeat := time.NewTicker(h.opt.Heartbeat)
	defer heartbeat.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case <-h.done:
			return
		case <-es.changed:
			es.changed = nil
			if wait := h.opt.MinInterval - time.Since(es.lastSent); wait > 0 {
				es.wake.Reset(wait) // the send then reads the newest view
				continue
			}
			err = es.send()
		case <-es.wake.C:
			err = es.send()
		case <-heartbeat.C:
			err = es.write([]byte(": keep-alive\n\n"))
		}
		if err != nil {
			return
		}
	}
}

// eventStream is one page's stream of events.
type eventStream struct {
	h    *Handler
	w    http.ResponseWriter
	rc   *http.ResponseController
	wake *time.Timer // the throttle or the refresh, whichever is due

	changed  <-chan struct{}
	last     []byte
	lastSent time.Time
}

// openStream answers with the stream's headers.
func (h *Handler) openStream(w http.ResponseWriter) *eventStream {
	es := &eventStream{h: h, w: w, rc: http.NewResponseController(w), wake: time.NewTimer(time.Hour)}
	es.wake.Stop()
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no") // a proxy must not hold updates back
	w.WriteHeader(http.StatusOK)
	return es
}

func (es *eventStream) close() {
	es.wake.Stop()
	_ = es.rc.SetWriteDeadline(time.Time{})
}

// write sends b at once, within the write timeout.
func (es *eventStream) write(b []byte) error {
	if err := es.rc.SetWriteDeadline(time.Now().Add(es.h.opt.WriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if _, err := es.w.Write(b); err != nil {
		return err
	}
	return es.rc.Flush()
}

// send writes the newest view unless it is the one sent last, and arms the
// refresh while a step runs.
func (es *eventStream) send() error {
	changed, msg, running, err := es.h.update()
	es.changed = changed
	if err != nil {
		return err
	}
	if running && es.h.opt.Refresh > 0 {
		es.wake.Reset(es.h.opt.Refresh)
	}
	if bytes.Equal(msg, es.last) {
		return nil
	}
	es.last, es.lastSent = msg, time.Now()
	return es.write(msg)
}

// update is the newest "view" event and the channel that the next change
// closes. Pages that ask with no change between share one rendering (within
// MinInterval while a step runs), so that a change costs one however many
// pages are open.
func (h *Handler) update() (changed <-chan struct{}, msg []byte, running bool, err error) {
	// One rendering at a time: the pages a change wakes together wait for the
	// first one's rather than all render the same.
	h.renderMu.Lock()
	defer h.renderMu.Unlock()
	changed = h.src.Changed() // before View: a change while it reads is not lost
	c := h.last
	// Unchanged, it stays good; but a running step's duration and log move on
	// unannounced.
	if c.msg != nil && c.changed == changed && (!c.running || time.Since(c.at) < h.opt.MinInterval) {
		return changed, c.msg, c.running, nil
	}
	at := time.Now()
	frag, title, running, err := h.fragment(h.src.View())
	if err != nil {
		frag = `<section><p class="error">The page could not be drawn: ` + html.EscapeString(err.Error()) + `</p></section>`
	}
	if msg, err = viewEvent(frag, title); err != nil {
		return nil, nil, false, err
	}
	h.last = rendered{changed: changed, at: at, msg: msg, running: running}
	return changed, msg, running, nil
}

// rendered is an update as update made it last.
type rendered struct {
	changed <-chan struct{}
	at      time.Time
	msg     []byte
	running bool
}

// viewEvent is one server-sent event named "view". JSON keeps it on one data
// line whatever the HTML holds.
func viewEvent(html, title string) ([]byte, error) {
	data, err := json.Marshal(struct {
		HTML  string `json:"html"`
		Title string `json:"title"`
	}{html, title})
	if err != nil {
		return nil, err
	}
	msg := make([]byte, 0, len(data)+20)
	msg = append(msg, "event: view\ndata: "...)
	msg = append(msg, data...)
	return append(msg, "\n\n"...), nil
}
