package notify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/planspec"
)

// deliverer hands one report to one destination. body is the report's JSON.
type deliverer interface {
	deliver(ctx context.Context, r Notice, body []byte) error
}

// Sink kinds, as metrics and logs name them.
const (
	KindCommand = "command"
	KindWebhook = "webhook"
	KindFile    = "file"
)

// sinkID names a sink's cursor: stable for the same configuration across restarts.
func sinkID(kind string, target ...string) string {
	if kind == KindFile {
		return KindFile
	}
	h := sha256.Sum256([]byte(strings.Join(target, "\x00")))
	return kind + "-" + hex.EncodeToString(h[:6])
}

// command runs argv for each report, without a shell, in its own process group,
// with the report's JSON on stdin and STEPSEQ_NOTIFY_* in its environment, which
// is otherwise the sidecar's as an agent inherits it (proc.InheritedEnv).
type command struct {
	argv  []string
	dir   string
	grace time.Duration
}

// outputTail is how much of a failed command's output its error keeps.
const outputTail = 2 << 10

func (c *command) deliver(ctx context.Context, r Notice, body []byte) error {
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Dir = c.dir
	cmd.Env = append(proc.InheritedEnv(os.Environ()), r.env()...)
	cmd.Stdin = io.MultiReader(bytes.NewReader(body), strings.NewReader("\n"))
	var out lastBytes
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A grandchild holding the output pipes does not hold the sink past the grace.
	cmd.WaitDelay = c.grace
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("command %s: %w", c.argv[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		return c.result(err, &out)
	case <-ctx.Done():
	}
	// Out of time (or closing): SIGTERM the group, SIGKILL whatever is left after
	// the grace, even when the leader went at once and left its children.
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	grace := time.NewTimer(c.grace)
	defer grace.Stop()
	select {
	case <-exited:
		if syscall.Kill(-pgid, 0) == nil {
			<-grace.C
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	case <-grace.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
	return fmt.Errorf("command %s: stopped: %w", c.argv[0], context.Cause(ctx))
}

func (c *command) result(err error, out *lastBytes) error {
	var ee *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		return nil
	case errors.As(err, &ee):
		if tail := strings.TrimSpace(out.String()); tail != "" {
			return fmt.Errorf("command %s: %v: %s", c.argv[0], err, tail)
		}
		return fmt.Errorf("command %s: %w", c.argv[0], err)
	default:
		return fmt.Errorf("command %s: %w", c.argv[0], err)
	}
}

// lastBytes keeps the last outputTail bytes written to it.
type lastBytes struct {
	mu  sync.Mutex
	buf []byte
}

func (l *lastBytes) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, b...)
	if over := len(l.buf) - outputTail; over > 0 {
		l.buf = append(l.buf[:0], l.buf[over:]...)
	}
	return len(b), nil
}

func (l *lastBytes) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}

// webhook POSTs each report's JSON to a URL. A reply other than 2xx is a failure;
// redirects are not followed, since a POST turned into a GET delivers nothing.
type webhook struct {
	url    string
	client *http.Client
}

func newWebhook(raw string) (*webhook, error) {
	if err := planspec.CheckWebhook(raw); err != nil {
		return nil, fmt.Errorf("notify: webhook %q: %w", redact(raw), err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 1
	return &webhook{url: raw, client: &http.Client{
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}, nil
}

func (w *webhook) deliver(ctx context.Context, r Notice, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook %s: %w", redact(w.url), err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "stepseq")
	// Receivers that know the header drop repeats without parsing the body.
	req.Header.Set("Idempotency-Key", r.ID)
	resp, err := w.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text holds the full URL, secrets and all
		}
		return fmt.Errorf("webhook %s: %w", redact(w.url), err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook %s: %s", redact(w.url), resp.Status)
	}
	return nil
}

func (w *webhook) close() { w.client.CloseIdleConnections() }

// redact keeps a URL's scheme and host: chat webhooks carry their secret in the
// path or query, and logs and journals must not.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(invalid URL)"
	}
	return u.Scheme + "://" + u.Host
}
