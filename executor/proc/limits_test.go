package proc

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stepseq/stepseq/executor/core"
)

// TestPreset_Limited holds every preset to each shape its CLI says "out of quota"
// in, as read from the CLIs' own packages (see the patterns' comments), and to
// the reset time it names.
func TestPreset_Limited(t *testing.T) {
	utc := time.UTC
	// 10:20:30 local; the CLIs format times in local time.
	ended := time.Date(2026, 12, 1, 10, 20, 30, 0, time.Local)
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	// A printed minute's wait ends a little after that minute.
	end := time.Minute + minuteSlack
	at := func(h, m int) time.Time { return time.Date(2026, 12, 1, h, m, 0, 0, time.Local).Add(end) }
	event := func(status string, resets int64) string {
		return fmt.Sprintf(`{"type":"rate_limit_event","rate_limit_info":{"status":%q,"resetsAt":%d,"rateLimitType":"five_hour"},"uuid":"u","session_id":"s1"}`, status, resets)
	}
	reset := time.Date(2026, 12, 1, 15, 0, 0, 0, utc)
	for _, tc := range []struct {
		name    string
		preset  string
		exit    core.Exit
		limited bool
		reset   time.Time // zero: no stated time
	}{
		// claude 1.x: the legacy result with the epoch after the bar.
		{"claude 1.x legacy epoch", "claude", core.Exit{Code: 1, Stdout: claudeJSON(true, fmt.Sprintf("Claude AI usage limit reached|%d", reset.Unix()))}, true, reset},
		{"claude 1.x session limit", "claude", core.Exit{Code: 1, Stdout: claudeJSON(true, "Session limit reached ∙ resets 3pm")}, true, at(15, 0)},
		// claude 2.x: "You've hit your … · resets <time> (<zone>)".
		{"claude 2.x 5-hour limit with zone", "claude", core.Exit{Code: 1, Stdout: claudeJSON(true, "You've hit your 5-hour limit · resets 3:30pm (Europe/Paris)")},
			true, time.Date(2026, 12, 1, 15, 30, 0, 0, paris).Add(end)},
		{"claude 2.x weekly limit, another day", "claude", core.Exit{Code: 1, Stdout: claudeJSON(true, "You've hit your weekly limit · resets Dec 3, 9am (UTC) · progress saved")},
			true, time.Date(2026, 12, 3, 9, 0, 0, 0, utc).Add(end)},
		{"claude 2.x next year", "claude", core.Exit{Code: 1, Stdout: claudeJSON(true, "You've hit your weekly limit · resets Jan 2, 2027, 9am (UTC)")},
			true, time.Date(2027, 1, 2, 9, 0, 0, 0, utc).Add(end)},
		{"claude 2.x a time already past today is tomorrow's", "claude", core.Exit{Code: 1, Stdout: claudeJSON(true, "You've hit your 5-hour limit · resets 9am")}, true,
			time.Date(2026, 12, 2, 9, 0, 0, 0, time.Local).Add(end)},
		{"claude 2.x stream rate_limit_event", "claude", core.Exit{Code: 1, Stdout: `{"type":"system","subtype":"init","session_id":"s1"}` + "\n" + event("rejected", reset.Unix()) + "\n" +
			claudeJSON(true, "You've hit your 5-hour limit")}, true, reset},
		{"claude 2.x allowed event is no limit", "claude", core.Exit{Stdout: event("allowed_warning", reset.Unix()) + "\n" + claudeJSON(false, "done")}, false, time.Time{}},
		{"claude 2.x out of credits, no time", "claude", core.Exit{Code: 1, Stdout: claudeJSON(true, "You're out of usage credits")}, true, time.Time{}},
		{"claude rate limit on stderr", "claude", core.Exit{Code: 1, Stderr: "API Error: 429 rate_limit_error"}, true, time.Time{}},
		{"claude bad key is no limit", "claude", core.Exit{Code: 1, Stdout: claudeJSON(true, "Invalid API key · Please run /login")}, false, time.Time{}},
		// codex 0.171: "Try again at 3:45 PM." local, another day with its date.
		{"codex usage limit today", "codex", core.Exit{Code: 1, Stdout: `{"type":"thread.started","thread_id":"t1"}` + "\n" +
			`{"type":"turn.failed","error":{"message":"You've hit your usage limit. Try again at 12:16 PM."}}` + "\n"}, true, at(12, 16)},
		{"codex usage limit another day", "codex", core.Exit{Code: 1, Stdout: `{"type":"turn.failed","error":{"message":"You've hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at Dec 3rd, 2026 3:45 PM."}}` + "\n"},
			true, time.Date(2026, 12, 3, 15, 45, 0, 0, time.Local).Add(end)},
		{"codex older: try again in", "codex", core.Exit{Code: 1, Stdout: `{"type":"error","message":"You've hit your usage limit. Try again in 2 hours 5 minutes."}` + "\n"},
			true, ended.Add(2*time.Hour + 5*time.Minute)},
		{"codex API rate limit", "codex", core.Exit{Code: 1, Stdout: `{"type":"turn.failed","error":{"message":"Rate limit reached for gpt-5 on tokens per min (TPM): Limit 30000, Used 29000. Please try again in 1.5s."}}` + "\n"},
			true, ended.Add(1500 * time.Millisecond)},
		{"codex free plan: no time", "codex", core.Exit{Code: 1, Stdout: `{"type":"turn.failed","error":{"message":"You've hit your usage limit. Upgrade to Plus to continue using Codex (https://chatgpt.com/explore/plus), or try again later."}}` + "\n"},
			true, time.Time{}},
		{"codex not logged in is no limit", "codex", core.Exit{Code: 1, Stderr: "Error: Not logged in. Run codex login"}, false, time.Time{}},
		// gemini 0.61: its JSON error on stderr, 429 / RESOURCE_EXHAUSTED.
		{"gemini retry in", "gemini", core.Exit{Code: 1, Stderr: "{\n  \"session_id\": \"g1\",\n  \"error\": {\n    \"type\": \"RetryableQuotaError\",\n    \"message\": \"[API Error: You exceeded your current quota. Please retry in 34.5s. (Status: RESOURCE_EXHAUSTED)]\",\n    \"code\": 429\n  }\n}\n"},
			true, ended.Add(34500 * time.Millisecond)},
		{"gemini reset after", "gemini", core.Exit{Code: 1, Stderr: "TerminalQuotaError: You have exhausted your capacity on this model. Your quota will reset after 3h12m5s."},
			true, ended.Add(3*time.Hour + 12*time.Minute + 5*time.Second)},
		{"gemini suggested retry", "gemini", core.Exit{Code: 1, Stdout: "{\n  \"error\": {\n    \"type\": \"RetryableQuotaError\",\n    \"message\": \"Quota exceeded for metric requests per minute\\nSuggested retry after 60s.\",\n    \"code\": 429\n  }\n}\n"},
			true, ended.Add(time.Minute)},
		{"gemini retryDelay", "gemini", core.Exit{Code: 1, Stderr: `{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"17s"}]}}`},
			true, ended.Add(17 * time.Second)},
		{"gemini daily quota: no time", "gemini", core.Exit{Code: 1, Stderr: "TerminalQuotaError: You have exhausted your daily quota on this model."}, true, time.Time{}},
		{"gemini auth is no limit", "gemini", core.Exit{Code: 41, Stderr: "Please set an Auth method"}, false, time.Time{}},
		// The rest read their words alone.
		{"opencode rate limit event", "opencode", core.Exit{Stdout: `{"type":"error","sessionID":"ses_1","error":{"name":"APIError","data":{"message":"Rate limit exceeded, retry in 20s"}}}` + "\n"}, true, ended.Add(20 * time.Second)},
		{"aider rate limit", "aider", core.Exit{Code: 1, Stderr: "litellm.RateLimitError: rate limit exceeded"}, true, time.Time{}},
		{"work about rate limits is no limit", "openclaw", core.Exit{Stdout: "implemented the rate limit; try again in 5 minutes"}, false, time.Time{}},
		{"a timeout is no limit", "claude", core.Exit{Code: -1, TimedOut: true, Stderr: "rate limit"}, false, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := LookupPreset(tc.preset)
			tc.exit.Ended = ended
			lim, ok := p.Limited(tc.exit)
			if ok != tc.limited {
				t.Fatalf("Limited = %v (%+v), want %v", ok, lim, tc.limited)
			}
			if !lim.Reset.Equal(tc.reset) {
				t.Errorf("reset %v, want %v", lim.Reset, tc.reset)
			}
			if ok && !strings.HasPrefix(lim.Text, tc.preset+": ") {
				t.Errorf("text %q: want the preset's words", lim.Text)
			}
		})
	}
}

// TestPreset_Session reads the session each CLI's output names.
func TestPreset_Session(t *testing.T) {
	for _, tc := range []struct {
		preset string
		exit   core.Exit
		want   string
	}{
		{"claude", core.Exit{Stdout: claudeJSON(true, "boom")}, "s1"},
		{"claude", core.Exit{Stdout: `{"type":"system","subtype":"init","session_id":"0b6c-aa"}` + "\n" + `{"type":"assistant"}` + "\n"}, "0b6c-aa"},
		{"codex", core.Exit{Stdout: `{"type":"thread.started","thread_id":"019a8f3e-7c1d-7000-8000-0123456789ab"}` + "\n" + `{"type":"turn.started"}` + "\n"}, "019a8f3e-7c1d-7000-8000-0123456789ab"},
		{"gemini", core.Exit{Stdout: "{\n  \"session_id\": \"g-42\",\n  \"response\": \"ok\"\n}\n"}, "g-42"},
		{"gemini", core.Exit{Code: 1, Stderr: "{\n  \"session_id\": \"g-43\",\n  \"error\": {\"type\": \"Error\", \"message\": \"x\"}\n}\n"}, "g-43"},
		{"opencode", core.Exit{Stdout: `{"type":"step_start","sessionID":"ses_9"}` + "\n"}, "ses_9"},
		{"claude", core.Exit{Stdout: "not json"}, ""},
		{"aider", core.Exit{Stdout: `"session_id": "x"`}, ""}, // no resume form: nothing to keep
	} {
		p, _ := LookupPreset(tc.preset)
		if got := p.Session(tc.exit); got != tc.want {
			t.Errorf("%s: Session = %q, want %q", tc.preset, got, tc.want)
		}
	}
}

// TestPreset_ResumeCommand lays out each resume form as the real CLI takes it.
func TestPreset_ResumeCommand(t *testing.T) {
	for _, tc := range []struct {
		preset string
		args   []string
		want   []string
	}{
		{"claude", nil, []string{"claude", "-p", "--resume", "S", "--output-format", "json", "--permission-mode", "acceptEdits"}},
		{"claude", []string{"--model", "opus"}, []string{"claude", "-p", "--resume", "S", "--output-format", "json", "--permission-mode", "acceptEdits", "--model", "opus"}},
		// codex refuses -s after resume: the sandbox and the extra args go before it.
		{"codex", []string{"-m", "gpt-5"}, []string{"codex", "exec", "--json", "--skip-git-repo-check", "-s", "workspace-write", "-m", "gpt-5", "resume", "S"}},
		{"gemini", nil, []string{"gemini", "--resume", "S", "--output-format", "json", "--approval-mode", "yolo", "-p"}},
		{"opencode", nil, []string{"opencode", "run", "--session", "S", "--format", "json"}},
		{"aider", nil, nil},
		{"goose", nil, nil},
	} {
		p, _ := LookupPreset(tc.preset)
		if diff := cmp.Diff(tc.want, p.ResumeCommand("S", tc.args)); diff != "" {
			t.Errorf("%s %v (-want +got):\n%s", tc.preset, tc.args, diff)
		}
		if p.ResumeCommand("", tc.args) != nil {
			t.Errorf("%s: a resume form without a session", tc.preset)
		}
	}
}

// TestAgent_ResumeCommand: the program found on PATH, the prompt last; a command
// given as a list never resumes.
func TestAgent_ResumeCommand(t *testing.T) {
	a := Agent{Argv: []string{"/opt/bin/claude", "-p", "--output-format", "json", "--permission-mode", "acceptEdits"}, Preset: "claude"}
	got := a.ResumeCommand("S", "fix it", nil)
	want := []string{"/opt/bin/claude", "-p", "--resume", "S", "--output-format", "json", "--permission-mode", "acceptEdits", "fix it"}
	if !slices.Equal(got, want) {
		t.Errorf("argv %q, want %q", got, want)
	}
	if (Agent{Argv: []string{"/bin/myagent"}}).ResumeCommand("S", "x", nil) != nil {
		t.Error("a plain argv agent resumed")
	}
}

// A CLI prints its reset cut to the minute: claude "resets 8:09am (UTC)" for
// 08:09:20, codex "try again at 8:10 AM". A wait on it ends a little after that
// minute; woken within it and still limited, the same words mean "now, still
// limited" (a short wait), never the same time tomorrow, which would pass
// limitWait and block the plan.
func TestResetAt_MinuteTruncated(t *testing.T) {
	// Without a zone the CLIs print local time, so codex's case is read in it.
	utc := func(h, m, s int) time.Time { return time.Date(2026, 12, 1, h, m, s, 0, time.UTC) }
	local := func(h, m, s int) time.Time { return time.Date(2026, 12, 1, h, m, s, 0, time.Local) }
	for _, tc := range []struct {
		name, words string
		now, want   time.Time
	}{
		{"said before the minute ends", "resets 8:09am (UTC)", utc(8, 9, 20), utc(8, 10, 0).Add(minuteSlack)},
		{"said again just after the minute", "resets 8:09am (UTC)", utc(8, 10, 5), utc(8, 10, 5).Add(stillLimited)},
		{"said a minute and a half on", "resets 8:09am (UTC)", utc(8, 10, 30), utc(8, 10, 30).Add(stillLimited)},
		{"codex, the next minute", "Try again at 8:10 AM.", local(8, 9, 20), local(8, 11, 0).Add(minuteSlack)},
		{"long past is tomorrow's", "resets 8:09am (UTC)", utc(8, 20, 0), utc(8, 10, 0).AddDate(0, 0, 1).Add(minuteSlack)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := resetAt(tc.words, tc.now)
			if !ok || !got.Equal(tc.want) {
				t.Errorf("resetAt(%q, %v) = %v, %v; want %v", tc.words, tc.now, got, ok, tc.want)
			}
			if !got.After(tc.now) {
				t.Errorf("a reset %v not after now %v: the try would fail at once", got, tc.now)
			}
		})
	}
}
