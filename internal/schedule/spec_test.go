package schedule

import (
	"strings"
	"testing"
	"time"
)

// now is 2025-01-01 12:00 UTC, a Wednesday, like clock.NewFake.
var now = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func TestParseWhen(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	tests := []struct {
		name string
		when When
		// want checks a valid spec; wantErr is a fragment of the error.
		wantKind  string
		wantFirst time.Time
		wantErr   string
	}{
		{name: "nothing", when: When{}, wantErr: `give exactly one of "at"`},
		{name: "two kinds", when: When{At: "in 5m", Every: "1h"}, wantErr: "give exactly one of"},
		{name: "relative", when: When{At: "in 20m"}, wantKind: KindAt, wantFirst: now.Add(20 * time.Minute)},
		{name: "relative in words", when: When{At: "in 2 hours and 30 minutes"}, wantKind: KindAt, wantFirst: now.Add(150 * time.Minute)},
		{name: "relative days", when: When{At: "In 3d"}, wantKind: KindAt, wantFirst: now.Add(72 * time.Hour)},
		{name: "relative fraction", when: When{At: "in 1.5h"}, wantKind: KindAt, wantFirst: now.Add(90 * time.Minute)},
		{name: "relative nonsense", when: When{At: "in a while"}, wantErr: `"a while" is not a duration`},
		{name: "relative without unit", when: When{At: "in 1h30"}, wantErr: "is not a duration"},
		{name: "rfc3339", when: When{At: "2025-01-01T14:00:00+01:00"}, wantKind: KindAt, wantFirst: now.Add(time.Hour)},
		{name: "rfc3339 past", when: When{At: "2025-01-01T11:00:00Z"}, wantErr: "is not in the future (it is now 2025-01-01T12:00:00Z)"},
		{name: "local without tz", when: When{At: "2025-01-02 09:00"}, wantErr: "has no UTC offset"},
		{name: "local with tz", when: When{At: "2025-01-02 09:00", TZ: "Europe/Berlin"}, wantKind: KindAt,
			wantFirst: time.Date(2025, 1, 2, 9, 0, 0, 0, berlin)},
		{name: "local T form with tz", when: When{At: "2025-01-02T09:00:00", TZ: "Europe/Berlin"}, wantKind: KindAt,
			wantFirst: time.Date(2025, 1, 2, 8, 0, 0, 0, time.UTC)},
		{name: "not a time", when: When{At: "tomorrow morning"}, wantErr: `is not a time: use RFC 3339`},
		{name: "every", when: When{Every: "30m"}, wantKind: KindEvery, wantFirst: now.Add(30 * time.Minute)},
		{name: "every day", when: When{Every: "1d"}, wantKind: KindEvery, wantFirst: now.Add(24 * time.Hour)},
		{name: "every too short", when: When{Every: "30s"}, wantErr: `"every" must be at least 1m0s, got 30s`},
		{name: "every zero", when: When{Every: "0m"}, wantErr: "not a positive duration"},
		{name: "every huge", when: When{Every: "100000d"}, wantErr: "too long"},
		{name: "every banana", when: When{Every: "banana"}, wantErr: `"banana" is not a duration`},
		{name: "cron weekdays", when: When{Cron: "0 9 * * 1-5", TZ: "America/New_York"}, wantKind: KindCron,
			wantFirst: time.Date(2025, 1, 1, 14, 0, 0, 0, time.UTC)}, // 09:00 EST is 14:00 UTC, still ahead today
		{name: "cron named days", when: When{Cron: "30 8 * * MON-FRI", TZ: "Europe/Berlin"}, wantKind: KindCron,
			wantFirst: time.Date(2025, 1, 2, 7, 30, 0, 0, time.UTC)},
		{name: "cron default utc", when: When{Cron: "0 13 * * *"}, wantKind: KindCron, wantFirst: now.Add(time.Hour)},
		{name: "cron descriptor", when: When{Cron: "@daily"}, wantKind: KindCron, wantFirst: time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC)},
		{name: "cron minute out of range", when: When{Cron: "61 * * * *"}, wantErr: "above maximum (59)"},
		{name: "cron four fields", when: When{Cron: "* * * *"}, wantErr: "expected exactly 5 fields"},
		{name: "cron six fields", when: When{Cron: "0 0 9 * * *"}, wantErr: "expected exactly 5 fields"},
		{name: "cron garbage", when: When{Cron: "every morning"}, wantErr: "Use five fields"},
		{name: "cron never", when: When{Cron: "0 0 30 2 *"}, wantErr: "never matches a date"},
		{name: "cron tz inside", when: When{Cron: "TZ=Europe/Berlin 0 9 * * *"}, wantErr: `put the time zone in "tz"`},
		// robfig/cron v3.0.1 panics on a TZ= prefix without a space; it must be an error.
		{name: "cron bare tz", when: When{Cron: "CRON_TZ=UTC"}, wantErr: `put the time zone in "tz"`},
		{name: "cron @every", when: When{Cron: "@every 5m"}, wantErr: `use "every"`},
		{name: "tz abbreviation", when: When{Cron: "0 9 * * *", TZ: "PST"}, wantErr: `unknown time zone "PST": use an IANA name`},
		{name: "tz offset", when: When{Cron: "0 9 * * *", TZ: "+02:00"}, wantErr: `unknown time zone "+02:00"`},
		{name: "tz local", when: When{Cron: "0 9 * * *", TZ: "Local"}, wantErr: `unknown time zone "Local"`},
		{name: "tz wrong case", when: When{Cron: "0 9 * * *", TZ: "europe/berlin"}, wantErr: "unknown time zone"},
		{name: "tz checked for at too", when: When{At: "in 5m", TZ: "Mars/Olympus"}, wantErr: "unknown time zone"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseWhen(tc.when, now, time.Minute)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if s.Kind != tc.wantKind {
				t.Errorf("kind = %q, want %q", s.Kind, tc.wantKind)
			}
			if got := s.first(now); !got.Equal(tc.wantFirst) {
				t.Errorf("first run = %s, want %s", got, tc.wantFirst)
			}
		})
	}
}

// A recurring job that missed runs continues at its next occurrence after
// now: one late run, never one per missed occurrence.
func TestAfterSkipsMissedOccurrences(t *testing.T) {
	every, err := ParseWhen(When{Every: "10m"}, now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	daily, err := ParseWhen(When{Cron: "0 9 * * *", TZ: "Europe/Berlin"}, now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	due := now.Add(10 * time.Minute)
	tests := []struct {
		name     string
		spec     Spec
		due, ran time.Time
		want     time.Time
	}{
		{"every on time", every, due, due, due.Add(10 * time.Minute)},
		{"every late by less than a period keeps the phase", every, due, due.Add(3 * time.Minute), due.Add(10 * time.Minute)},
		{"every late by an hour", every, due, due.Add(65 * time.Minute), due.Add(70 * time.Minute)},
		{"every late by exactly periods", every, due, due.Add(60 * time.Minute), due.Add(70 * time.Minute)},
		{"cron late by three days", daily, time.Date(2025, 1, 2, 8, 0, 0, 0, time.UTC),
			time.Date(2025, 1, 5, 10, 0, 0, 0, time.UTC), time.Date(2025, 1, 6, 8, 0, 0, 0, time.UTC)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.spec.after(tc.due, tc.ran); !got.Equal(tc.want) {
				t.Errorf("after = %s, want %s", got, tc.want)
			}
		})
	}
}

// Daylight saving: a Berlin 09:00 job stays at 09:00 local across the
// switch, so its UTC time moves by an hour.
func TestCronFollowsDaylightSaving(t *testing.T) {
	s, err := ParseWhen(When{Cron: "0 9 * * *", TZ: "Europe/Berlin"}, now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before := s.after(time.Date(2025, 3, 29, 8, 0, 0, 0, time.UTC), time.Date(2025, 3, 29, 8, 0, 0, 0, time.UTC))
	if want := time.Date(2025, 3, 30, 7, 0, 0, 0, time.UTC); !before.Equal(want) {
		t.Errorf("run after the spring switch = %s, want %s", before, want)
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		when When
		want string
	}{
		{When{At: "in 20m"}, "once at Wed 2025-01-01 12:20 UTC"},
		{When{At: "2025-01-02 09:00", TZ: "Europe/Berlin"}, "once at Thu 2025-01-02 09:00 CET"},
		{When{Every: "90m"}, "every 1h30m"},
		{When{Every: "2h"}, "every 2h"},
		{When{Cron: "0 9 * * 1-5", TZ: "Asia/Tokyo"}, `cron "0 9 * * 1-5" (Asia/Tokyo)`},
		{When{Cron: "@hourly"}, `cron "@hourly" (UTC)`},
	}
	for _, tc := range tests {
		s, err := ParseWhen(tc.when, now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Describe(); got != tc.want {
			t.Errorf("Describe(%+v) = %q, want %q", tc.when, got, tc.want)
		}
	}
}
