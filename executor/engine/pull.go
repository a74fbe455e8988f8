package engine

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// The pull model: a step whose agent is `mcp` starts no process. Its
// try is offered to the MCP client that asks for work; that client holds a token
// for the step and try, and its done report ends the try, which the machine then
// verifies as it would any agent's exit 0.

// ErrStaleToken is matched by a token for a try that is over, or not a token.
var ErrStaleToken = errors.New("executor: stale token")

// Offer is a pulled try as a worker gets it: what the try offers (the core's
// rule) and the token its reports carry.
type Offer struct {
	core.PulledTry
	Token string `json:"token"`
}

// PullLauncher offers pulled tries to MCP clients. Launch registers the offer;
// Take hands it to a client; the try ends when its done report is accepted, when
// it is stopped (launch timeout, a retry, shutdown) or when its timeout passes.
type PullLauncher struct {
	key []byte

	mu      sync.Mutex
	current *pullRun
}

// NewPullLauncher returns a launcher whose tokens are signed with key (see
// PullKey).
func NewPullLauncher(key []byte) *PullLauncher {
	return &PullLauncher{key: key}
}

// RunPullKey is the key that signs run's tokens, derived from the workspace's
// (PullKey): a token of one run's try is no token of another's. The workspace's
// own run ("") signs with the workspace's key itself.
func RunPullKey(key []byte, run string) []byte {
	if run == "" {
		return key
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("stepseq run " + run))
	return mac.Sum(nil)
}

// pullKeyRel is where the workspace keeps the key that signs its tokens, so that
// a token outlives the process that issued it (a client that restarts `stepseq
// mcp` between calls).
var pullKeyRel = filepath.Join(store.MetaDir, "pull.key")

// pullKeyCap bounds the key file: 64 hex digits and a newline.
var pullKeyCap = store.Cap{Bytes: 4 << 10, What: "a token key",
	Hint: "it holds 64 hex digits; remove it and stepseq makes a new one (tokens issued before are then refused)"}

// PullKey returns the workspace's token key, making it the first time: written
// whole with mode 0600 under a temporary name, then linked into place, so that a
// reader never sees half a key and two processes making it at once agree on the
// one that was linked first. It is read as any workspace file is, and refused when
// others may read it.
func PullKey(ws store.Workspace) ([]byte, error) {
	root, err := os.OpenRoot(ws.Dir)
	if err != nil {
		return nil, fmt.Errorf("token key: %w", err)
	}
	defer root.Close()
	path := filepath.Join(ws.Dir, pullKeyRel)
	key, err := readPullKey(root, path)
	if !errors.Is(err, os.ErrNotExist) {
		return key, err
	}
	if err := root.MkdirAll(store.MetaDir, 0o755); err != nil {
		return nil, fmt.Errorf("token key: %w", err)
	}
	key = make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand)
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	tmp := pullKeyRel + "." + hex.EncodeToString(nonce[:]) + ".tmp"
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("token key: %w", err)
	}
	defer root.Remove(tmp)
	_, err = f.WriteString(hex.EncodeToString(key) + "\n")
	if err == nil {
		err = f.Chmod(0o600) // whatever the umask left
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("token key %s: %w", path, err)
	}
	if err := root.Link(tmp, pullKeyRel); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("token key %s: %w", path, err)
	}
	// Linked, or another process linked its own first: the file is the key.
	return readPullKey(root, path)
}

func readPullKey(root *os.Root, path string) ([]byte, error) {
	data, fi, err := store.ReadFileInfoIn(root, pullKeyRel, pullKeyCap)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("token key %s: mode %04o lets others read it; run chmod 600 %s, or remove it to make a new key", path, fi.Mode().Perm(), path)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("token key %s: not 64 hex digits; remove it and stepseq makes a new one (tokens issued before are then refused)", path)
	}
	return key, nil
}

// Launch registers the try's offer.
func (p *PullLauncher) Launch(t proc.TrySpec) (proc.Started, error) {
	r := &pullRun{
		p:      p,
		offer:  Offer{PulledTry: core.PulledTry{Step: t.Step, Try: t.Try, Prompt: t.Prompt, RequiredOutputs: t.RequiredOutputs, Result: t.Result}},
		claims: core.Claims{},
		done:   make(chan core.Exit, 1),
		start:  time.Now(),
	}
	r.offer.Token = p.Token(t.Step, t.Try)
	if t.Proc.Timeout > 0 {
		r.timer = time.AfterFunc(t.Proc.Timeout, func() { r.end(core.Exit{Code: -1, TimedOut: true}) })
	}
	p.mu.Lock()
	p.current = r
	p.mu.Unlock()
	return r, nil
}

// Take hands the current offer to client, as core.Claims allows: a try taken
// by another client whose session lives (live; nil: every claim lives) is not
// offered twice, and a client gets it again with the same token. ok is false
// when nothing is offered, with why ("" when no try is launched).
func (p *PullLauncher) Take(client string, live func(client string) bool) (o Offer, ok bool, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.current
	if r == nil {
		return Offer{}, false, ""
	}
	if ok, why := r.claims.Take(r.offer.Step, r.offer.Try, client, live); !ok {
		return Offer{}, false, why
	}
	return r.offer, true, ""
}

// Token is the token of step id's try: the step and try, signed.
func (p *PullLauncher) Token(id string, try int) string {
	return signToken(p.key, id, try)
}

// Verify returns the step and try a token names. A token this launcher did not
// sign is refused.
func (p *PullLauncher) Verify(token string) (string, int, error) {
	return verifyToken(p.key, token)
}

// Reported ends the pulled try of step id once its done report was accepted: the
// try exits 0 for the machine to verify.
func (p *PullLauncher) Reported(id string, try int) {
	p.mu.Lock()
	r := p.current
	p.mu.Unlock()
	if r != nil && r.offer.Step == id && r.offer.Try == try {
		r.end(core.Exit{Code: 0})
	}
}

type pullRun struct {
	p      *PullLauncher
	offer  Offer
	claims core.Claims
	done   chan core.Exit
	start  time.Time
	timer  *time.Timer
	once   sync.Once
}

func (r *pullRun) end(e core.Exit) {
	r.once.Do(func() {
		if r.timer != nil {
			r.timer.Stop()
		}
		r.p.mu.Lock()
		if r.p.current == r {
			r.p.current = nil
		}
		r.p.mu.Unlock()
		e.Started, e.Ended = r.start, time.Now()
		r.done <- e
	})
}

func (r *pullRun) Done() <-chan core.Exit { return r.done }

// Stop withdraws the offer; the try ends as a killed agent does.
func (r *pullRun) Stop() { r.end(core.Exit{Code: -1, Stderr: "stopped"}) }

func (r *pullRun) Ident() (int, uint64)   { return 0, 0 }
func (r *pullRun) LastOutput() time.Time  { return time.Time{} }
func (r *pullRun) Finish(core.Exit) error { return nil }
func (r *pullRun) EndGroup()              {}

// signToken is "<step>.<try>.<mac>", the step base64url-encoded.
func signToken(key []byte, id string, try int) string {
	return signTokenBody(key, base64.RawURLEncoding.EncodeToString([]byte(id))+"."+strconv.Itoa(try))
}

func verifyToken(key []byte, token string) (string, int, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", 0, fmt.Errorf("%w: not a stepseq token; call step_current for one", ErrStaleToken)
	}
	if !hmac.Equal([]byte(token), []byte(signTokenBody(key, parts[0]+"."+parts[1]))) {
		return "", 0, fmt.Errorf("%w: this token was not issued by this server (it restarted, or the token was altered); call step_current for a new one", ErrStaleToken)
	}
	id, err := base64.RawURLEncoding.DecodeString(parts[0])
	try, err2 := strconv.Atoi(parts[1])
	if err != nil || err2 != nil {
		return "", 0, fmt.Errorf("%w: not a stepseq token; call step_current for one", ErrStaleToken)
	}
	return string(id), try, nil
}

func signTokenBody(key []byte, body string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(body))
	return body + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:18])
}

// pullReported ends a pulled try whose done report the machine just accepted.
func (d *driver) pullReported(v core.ReportVerdict) {
	a := d.active
	if !v.Accepted || a == nil || a.step != v.Step || d.pull == nil {
		return
	}
	if _, ok := a.run.(*pullRun); !ok {
		return
	}
	run := d.m.State().Run(a.step)
	if n := len(run.Reports); n > 0 && run.Reports[n-1].Status == planspec.ReportDone && run.Reports[n-1].Try == a.try {
		d.pull.Reported(a.step, a.try)
	}
}
