package proc

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Usage limits: an agent CLI that says it is out of quota has not
// failed its try. Each preset reads its CLI's words for the limit and for when it
// ends (presets.go, beside its other readings); what they share is here: reading
// a reset written as a clock time or as a wait.

// limitPatterns are compiled on first use: every stepseq command links this package.
var limitPatterns = sync.OnceValue(func() struct {
	in, part, at *regexp.Regexp
} {
	const clock = `(?:(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]* (?P<day>\d{1,2})(?:st|nd|rd|th)?,? (?:(?P<year>\d{4}),? )?)?` +
		`(?P<hour>\d{1,2})(?::(?P<min>\d{2}))? ?(?P<ampm>[AaPp][Mm])(?: \((?P<zone>[A-Za-z_+-]+(?:/[A-Za-z0-9_+-]+)*)\))?`
	return struct{ in, part, at *regexp.Regexp }{
		// "try again in 1.5s", "Please retry in 500ms", "try again in 2 hours 5
		// minutes", "reset after 3h12m5s", "Suggested retry after 60s".
		in: regexp.MustCompile(`(?i)(?:try again|retry|reset|resets)(?: in| after)\s+((?:\d+(?:\.\d+)?\s*(?:milliseconds?|ms|minutes?|mins?|m|seconds?|secs?|s|hours?|hrs?|h|days?|d)[\s,]*(?:and\s+)?)+)`),
		// "resets 3pm (Europe/Paris)", "Try again at 3:45 PM", "resets Dec 3, 3pm".
		part: regexp.MustCompile(`(\d+(?:\.\d+)?)\s*([a-z]+)`),
		at:   regexp.MustCompile(`(?i)(?:resets|reset at|try again at)\s+(?:at\s+)?` + clock),
	}
})

// resetIn reads a wait written after "try again in" or "retry in", from now.
func resetIn(text string, now time.Time) (time.Time, bool) {
	m := limitPatterns().in.FindStringSubmatch(text)
	if m == nil {
		return time.Time{}, false
	}
	var d time.Duration
	for _, part := range limitPatterns().part.FindAllStringSubmatch(strings.ToLower(m[1]), -1) {
		n, err := strconv.ParseFloat(part[1], 64)
		if err != nil {
			continue
		}
		unit := time.Second
		switch u := part[2]; {
		case u == "ms" || strings.HasPrefix(u, "milli"):
			unit = time.Millisecond
		case u == "m" || strings.HasPrefix(u, "min"):
			unit = time.Minute
		case u == "h" || strings.HasPrefix(u, "h"):
			unit = time.Hour
		case u == "d" || strings.HasPrefix(u, "day"):
			unit = 24 * time.Hour
		}
		d += time.Duration(n * float64(unit))
	}
	if d <= 0 {
		return time.Time{}, false
	}
	return now.Add(d), true
}

// resetAt reads a reset written as a clock time after "resets" or "try again
// at": "3pm", "3:45 PM", "Dec 3, 3pm", "Dec 3rd, 2026 3:45 PM", with the zone
// in parentheses that claude adds, else in local time (the CLIs format it in
// theirs, which is stepseq's: they inherit its environment). A time of day
// without a date is its next occurrence after now.
func resetAt(text string, now time.Time) (time.Time, bool) {
	re := limitPatterns().at
	m := re.FindStringSubmatch(text)
	if m == nil {
		return time.Time{}, false
	}
	get := func(name string) string { return m[re.SubexpIndex(name)] }
	loc := time.Local
	if z := get("zone"); z != "" {
		if l, err := time.LoadLocation(z); err == nil {
			loc = l
		}
	}
	hour, _ := strconv.Atoi(get("hour"))
	minute, _ := strconv.Atoi(get("min"))
	if hour < 1 || hour > 12 || minute > 59 {
		return time.Time{}, false
	}
	hour %= 12
	if strings.EqualFold(get("ampm"), "pm") {
		hour += 12
	}
	local := now.In(loc)
	if mon := get("mon"); mon != "" {
		month, _ := time.Parse("Jan", mon[:1]+strings.ToLower(mon[1:3]))
		day, _ := strconv.Atoi(get("day"))
		year := local.Year()
		explicit := get("year") != ""
		if explicit {
			year, _ = strconv.Atoi(get("year"))
		}
		t := time.Date(year, month.Month(), day, hour, minute, 0, 0, loc)
		if !explicit && t.Before(local.Add(-24*time.Hour)) {
			t = t.AddDate(1, 0, 0) // "Jan 2" read in late December
		}
		return minuteEnd(t, local), true
	}
	t := time.Date(local.Year(), local.Month(), local.Day(), hour, minute, 0, 0, loc)
	if t.Add(justPassed).Before(local) {
		t = t.AddDate(0, 0, 1)
	}
	return minuteEnd(t, local), true
}

const (
	// minuteSlack is how long after a printed minute ends a wait on it ends:
	// the CLIs print a reset cut to the minute ("resets 8:09am" for 08:09:20).
	minuteSlack = 2 * time.Second
	// justPassed is how far back a printed time still means "now, still
	// limited" rather than the same time tomorrow: the CLI prints the minute
	// its reset falls in, which may be the minute that just went by.
	justPassed = 2 * time.Minute
	// stillLimited is the short wait after a printed time that just went by.
	stillLimited = 30 * time.Second
)

// minuteEnd is when a wait on the printed minute t ends: a little after that
// minute, or, when that is already past (the limit outlasted its printed
// minute), a short while from now.
func minuteEnd(t, now time.Time) time.Time {
	end := t.Add(time.Minute + minuteSlack)
	if !end.After(now) {
		return now.Add(stillLimited)
	}
	return end
}

// statedReset is the reset a CLI's words name, as a clock time or as a wait.
func statedReset(text string, now time.Time) time.Time {
	if t, ok := resetAt(text, now); ok {
		return t
	}
	if t, ok := resetIn(text, now); ok {
		return t
	}
	return time.Time{}
}
