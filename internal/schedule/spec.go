package schedule

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/robfig/cron/v3"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Schedule kinds.
const (
	KindAt    = "at"    // once, at a time
	KindEvery = "every" // at a fixed interval
	KindCron  = "cron"  // at the times a cron expression names, in a time zone
)

// Spec says when a job runs. It is what jobs.json stores, so its JSON shape
// is a file format.
type Spec struct {
	Kind  string    `json:"kind"`
	At    time.Time `json:"at,omitzero"`
	Every Duration  `json:"every,omitzero"`
	Expr  string    `json:"expr,omitempty"`
	// TZ is the IANA zone of a cron expression ("" is UTC).
	TZ string `json:"tz,omitempty"`

	sched cron.Schedule // compiled Expr, set by compile
}

// Duration is a time.Duration written as "1h30m0s" in JSON.
type Duration time.Duration

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// When is what the model asks for: exactly one of At, Every and Cron, with
// TZ for Cron (and for an At without a UTC offset).
type When struct {
	At    string
	Every string
	Cron  string
	TZ    string
}

// cronParser accepts the standard five fields and descriptors (@daily...).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseWhen validates w against now and returns the Spec. Its errors are
// written for the model: they say what was wrong and show a valid example.
// minEvery is the shortest interval allowed.
func ParseWhen(w When, now time.Time, minEvery time.Duration) (Spec, error) {
	w.At, w.Every, w.Cron, w.TZ = strings.TrimSpace(w.At), strings.TrimSpace(w.Every), strings.TrimSpace(w.Cron), strings.TrimSpace(w.TZ)
	given := 0
	for _, v := range []string{w.At, w.Every, w.Cron} {
		if v != "" {
			given++
		}
	}
	if given != 1 {
		return Spec{}, errors.New(`give exactly one of "at" (a time, or "in 20m"), "every" (an interval like "2h") ` +
			`or "cron" (an expression like "0 9 * * 1-5" with "tz")`)
	}
	loc, err := loadZone(w.TZ)
	if err != nil {
		return Spec{}, err
	}
	switch {
	case w.At != "":
		at, err := parseAt(w.At, w.TZ, loc, now)
		if err != nil {
			return Spec{}, err
		}
		return Spec{Kind: KindAt, At: at, TZ: w.TZ}, nil
	case w.Every != "":
		d, err := parseDuration(w.Every)
		if err != nil {
			return Spec{}, fmt.Errorf(`"every": %w`, err)
		}
		if d < minEvery {
			return Spec{}, fmt.Errorf(`"every" must be at least %s, got %s`, minEvery, d)
		}
		return Spec{Kind: KindEvery, Every: Duration(d)}, nil
	default:
		s := Spec{Kind: KindCron, Expr: w.Cron, TZ: w.TZ}
		if err := s.compile(); err != nil {
			return Spec{}, err
		}
		if s.sched.Next(now).IsZero() {
			return Spec{}, fmt.Errorf("cron expression %q never matches a date (check the day and month fields)", w.Cron)
		}
		return s, nil
	}
}

// compile prepares a stored spec for computing run times and checks it.
func (s *Spec) compile() error {
	switch s.Kind {
	case KindAt:
		if s.At.IsZero() {
			return errors.New(`"at" schedule without a time`)
		}
		return nil
	case KindEvery:
		if s.Every <= 0 {
			return errors.New(`"every" schedule without a positive interval`)
		}
		return nil
	case KindCron:
		loc, err := loadZone(s.TZ)
		if err != nil {
			return err
		}
		sched, err := parseCron(s.Expr)
		if err != nil {
			return err
		}
		// parseCron only returns *cron.SpecSchedule (see its "@every" check).
		spec := sched.(*cron.SpecSchedule)
		spec.Location = loc
		s.sched = spec
		return nil
	}
	return fmt.Errorf("unknown schedule kind %q", s.Kind)
}

// parseCron parses a five-field expression or a descriptor. Time zones are
// refused inside the expression (they go in tz), which also keeps robfig's
// parser away from its "TZ=" prefix handling, which panics on some inputs.
func parseCron(expr string) (sched cron.Schedule, err error) {
	switch {
	case strings.Contains(expr, "TZ="):
		return nil, fmt.Errorf(`cron expression %q: put the time zone in "tz" (e.g. "Europe/Berlin"), not in the expression`, expr)
	case strings.HasPrefix(expr, "@every"):
		return nil, fmt.Errorf(`cron expression %q: for a fixed interval use "every" (e.g. "every": "2h") instead of "cron"`, expr)
	}
	defer func() {
		if p := recover(); p != nil {
			sched, err = nil, fmt.Errorf("cron expression %q could not be parsed", expr)
		}
	}()
	sched, err = cronParser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("cron expression %q is not valid: %v. Use five fields: minute hour day-of-month month "+
			`day-of-week, e.g. "30 8 * * 1-5" (08:30 on weekdays) or "0 */2 * * *" (every two hours), or @daily, @weekly`, expr, err)
	}
	return sched, nil
}

// loadZone resolves an IANA zone name; "" is UTC. "Local" is refused: it
// would mean the server's zone, which the user cannot see.
func loadZone(tz string) (*time.Location, error) {
	if tz == "" || tz == "UTC" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(tz)
	if err != nil && !zoneDataPresent() {
		return nil, fmt.Errorf("time zone %q cannot be used: this machine has no time zone data (the operator should install the tzdata package); use \"UTC\" meanwhile", tz)
	}
	if err != nil || tz == "Local" {
		return nil, fmt.Errorf(`unknown time zone %q: use an IANA name such as "Europe/Berlin", "America/New_York", `+
			`"Asia/Tokyo" or "UTC" (abbreviations like PST and offsets like +02:00 are not zone names)`, tz)
	}
	return loc, nil
}

// zoneDataPresent reports whether the system has IANA zone data; the binary
// does not embed it (see docs/schedule.md).
var zoneDataPresent = sync.OnceValue(func() bool {
	_, err := time.LoadLocation("America/New_York")
	return err == nil
})

// localLayouts are date-times without a UTC offset, read in the job's tz.
var localLayouts = []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"}

// parseAt reads "in 20m", an RFC 3339 time, or a local date-time with tz.
func parseAt(s, tz string, loc *time.Location, now time.Time) (time.Time, error) {
	var at time.Time
	lower := strings.ToLower(s)
	switch {
	case strings.HasPrefix(lower, "in "):
		d, err := parseDuration(s[3:])
		if err != nil {
			return time.Time{}, fmt.Errorf(`"at": %w`, err)
		}
		at = now.Add(d)
	default:
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t, err = parseLocal(s, tz, loc)
		}
		if err != nil {
			return time.Time{}, err
		}
		at = t
	}
	if !at.After(now) {
		return time.Time{}, fmt.Errorf(`"at" %q is not in the future (it is now %s)`, s, now.In(loc).Format(time.RFC3339))
	}
	return at, nil
}

func parseLocal(s, tz string, loc *time.Location) (time.Time, error) {
	for _, layout := range localLayouts {
		t, err := time.ParseInLocation(layout, s, loc)
		if err != nil {
			continue
		}
		if tz == "" {
			return time.Time{}, fmt.Errorf(`"at" %q has no UTC offset: add one ("2025-06-01T09:00:00+02:00") or give "tz" `+
				`(e.g. "Europe/Berlin") so the time is read in that zone`, s)
		}
		return t, nil
	}
	return time.Time{}, fmt.Errorf(`"at" %q is not a time: use RFC 3339 ("2025-06-01T09:00:00+02:00"), a local time `+
		`with "tz" ("2025-06-01 09:00"), or a delay ("in 20m", "in 2h30m", "in 3d")`, s)
}

// durationPart is one number and unit of a relative duration: "2h", "30 min".
var durationPart = regexp.MustCompile(`^(\d+(?:\.\d+)?)\s*([a-z]+)\s*(?:,|and)?\s*`)

var durationUnits = map[string]time.Duration{
	"ms": time.Millisecond,
	"s":  time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
}

// maxDuration bounds intervals and delays (about 10 years), so arithmetic
// on them never overflows.
const maxDuration = 10 * 365 * 24 * time.Hour

// parseDuration reads Go durations ("1h30m") and the spelled-out forms
// models write ("2 hours 30 minutes", "3d").
func parseDuration(s string) (time.Duration, error) {
	rest := strings.ToLower(strings.TrimSpace(s))
	if rest == "" {
		return 0, errors.New(`empty duration: write e.g. "20m", "2h30m" or "3d"`)
	}
	var total time.Duration
	for rest != "" {
		m := durationPart.FindStringSubmatch(rest)
		unit, known := time.Duration(0), false
		if m != nil {
			unit, known = durationUnits[m[2]]
		}
		if !known {
			return 0, fmt.Errorf(`%q is not a duration: write e.g. "20m", "2h30m", "90s" or "3d"`, s)
		}
		n, err := strconv.ParseFloat(m[1], 64)
		if err != nil || n*float64(unit) > float64(maxDuration) {
			return 0, fmt.Errorf("%q is too long (at most about 10 years)", s)
		}
		total += time.Duration(n * float64(unit))
		if total > maxDuration {
			return 0, fmt.Errorf("%q is too long (at most about 10 years)", s)
		}
		rest = rest[len(m[0]):]
	}
	if total <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration", s)
	}
	return total, nil
}

// first is when a new job first runs.
func (s Spec) first(now time.Time) time.Time {
	switch s.Kind {
	case KindAt:
		return s.At
	case KindEvery:
		return now.Add(time.Duration(s.Every))
	}
	return s.sched.Next(now)
}

// after is the next run of a recurring job that was due at due and ran at
// now: the first occurrence after now, so runs missed while the daemon was
// down or the machine slept are skipped, never fired in a burst. Intervals
// keep their phase (due + k*every). A one-shot has no next run (zero).
func (s Spec) after(due, now time.Time) time.Time {
	switch s.Kind {
	case KindEvery:
		every := time.Duration(s.Every)
		next := due.Add(every)
		if !next.After(now) {
			next = due.Add((now.Sub(due)/every + 1) * every)
		}
		return next
	case KindCron:
		return s.sched.Next(now)
	}
	return time.Time{}
}

// Recurring reports whether the job runs more than once.
func (s Spec) Recurring() bool { return s.Kind != KindAt }

// location is the zone times of this spec are shown in.
func (s Spec) location() *time.Location {
	if loc, err := loadZone(s.TZ); err == nil {
		return loc
	}
	return time.UTC
}

// Describe says when the job runs, for the model and the user.
func (s Spec) Describe() string {
	switch s.Kind {
	case KindAt:
		return "once at " + formatTime(s.At, s.location())
	case KindEvery:
		return "every " + shortDuration(time.Duration(s.Every))
	case KindCron:
		tz := s.TZ
		if tz == "" {
			tz = "UTC"
		}
		return fmt.Sprintf("cron %q (%s)", s.Expr, tz)
	}
	return s.Kind
}

// formatTime is how times appear in tool results and instructions.
func formatTime(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("Mon 2006-01-02 15:04 MST")
}

// shortDuration prints 2h0m0s as 2h and 1h30m0s as 1h30m.
func shortDuration(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
