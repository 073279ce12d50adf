package llm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// TestClassify covers the whole failure table: every kind, through the
// errors the adapters and the router really return, and what each means
// for the router, the breaker, readiness, the metric, /status and the user.
func TestClassify(t *testing.T) {
	refused := get(t, "http://"+closedAddr(t)+"/v1/chat/completions?key=sk-secret")
	routeErr := func(err error) error { return fmt.Errorf("route smart (primary/model-a): %w", err) }
	type want struct {
		kind     llm.Kind
		retry    llm.Retry
		fallback bool
		breaker  llm.Signal
		health   llm.Signal
		metric   string
		reason   string // SafeReason, or a prefix of it ending in "…"
		user     string // UserText, or a prefix of it ending in "…"
	}
	backoff, none, up, down := llm.RetryBackoff, llm.SignalNone, llm.SignalUp, llm.SignalDown
	tests := []struct {
		name string
		err  error
		want want
	}{
		{"success", nil, want{llm.KindOK, llm.RetryNo, false, up, up, "ok", "answered", ""}},
		{"cancelled", routeErr(context.Canceled),
			want{llm.KindCancelled, llm.RetryNo, false, none, none, "cancelled", "cancelled", "⚠️ The answer was cancelled."}},
		{"cancelled while another route had failed", fmt.Errorf("every route failed: %w",
			errors.Join(&llm.APIError{Status: 503}, context.Canceled)),
			want{llm.KindCancelled, llm.RetryNo, false, none, none, "cancelled", "cancelled", "…"}},
		// The caller's deadline (a subagent's timeout): a stop, like a
		// cancellation; it used to be "unavailable" for the metrics and
		// readiness while the router gave up at once.
		{"budget spent", fmt.Errorf("admit: %w", &llm.BudgetError{Text: "today's budget of $2 is spent; it resets at 00:00 Europe/Berlin; /usage shows where it went."}),
			want{llm.KindBudget, llm.RetryNo, false, none, none, "budget", "the usage budget is spent",
				"⚠️ today's budget of $2 is spent; it resets at 00:00 Europe/Berlin; /usage shows where it went."}},
		{"caller's deadline", routeErr(context.DeadlineExceeded),
			want{llm.KindDeadline, llm.RetryNo, false, none, none, "deadline", "time ran out before the model answered",
				"⚠️ The model took too long to answer. Please try again."}},
		// APIErrors as the adapters build them: the adapter's Kind (each
		// adapter's vocabulary test covers its own codes), else the status.
		{"provider's timeout", &llm.APIError{Provider: "primary", Type: "timeout", Kind: llm.KindTimeout, Message: "no complete answer within 5m0s", Err: context.DeadlineExceeded},
			want{llm.KindTimeout, backoff, true, down, down, "unavailable",
				"the model provider took too long — no complete answer within 5m0s", "⚠️ The model took too long to answer. Please try again in a moment."}},
		{"401", &llm.APIError{Provider: "primary", Status: 401, Type: "bad_key"},
			want{llm.KindAuth, llm.RetryNo, false, up, down, "auth", "the model provider refused the API key — primary answered HTTP 401",
				"⚠️ The model provider refused the API key. …"}},
		{"403", &llm.APIError{Provider: "backup", Status: 403},
			want{llm.KindAuth, llm.RetryNo, false, up, down, "auth", "the model provider refused the API key — backup answered HTTP 403", "…"}},
		{"a bad key the adapter reads in a 400", &llm.APIError{Provider: "primary", Status: 400, Type: "KEY_INVALID", Kind: llm.KindAuth},
			want{llm.KindAuth, llm.RetryNo, false, up, down, "auth", "…", "…"}},
		{"quota", &llm.APIError{Provider: "primary", Status: 429, Type: "quota_spent", Kind: llm.KindQuota},
			want{llm.KindQuota, llm.RetryNo, true, up, down, "quota", "the model provider's quota is used up — primary answered HTTP 429",
				"⚠️ The model provider says the account's quota is used up. …"}},
		{"429 with Retry-After", &llm.APIError{Provider: "primary", Status: 429, RetryAfter: 7 * time.Second},
			want{llm.KindRateLimit, backoff, true, down, up, "rate_limited", "the model provider is rate-limiting — primary answered HTTP 429",
				"⚠️ The model provider is rate-limiting me right now. Please try again in a minute."}},
		{"rate limit inside a stream", &llm.APIError{Provider: "primary", Type: "slow_down", Kind: llm.KindRateLimit},
			want{llm.KindRateLimit, backoff, true, down, up, "rate_limited", "the model provider is rate-limiting", "…"}},
		{"503", &llm.APIError{Provider: "primary", Status: 503},
			want{llm.KindUnavailable, backoff, true, down, down, "unavailable", "the model provider is having trouble — primary answered HTTP 503",
				"⚠️ The model provider is having trouble right now. Please try again in a moment."}},
		{"529", &llm.APIError{Provider: "primary", Status: 529},
			want{llm.KindUnavailable, backoff, true, down, down, "unavailable", "…", "…"}},
		{"409", &llm.APIError{Provider: "primary", Status: 409}, want{llm.KindUnavailable, backoff, true, down, down, "unavailable", "…", "…"}},
		{"408", &llm.APIError{Provider: "primary", Status: 408}, want{llm.KindUnavailable, backoff, true, down, down, "unavailable", "…", "…"}},
		{"error event mid-stream", &llm.APIError{Provider: "primary", Type: "boom_error", Message: "boom"},
			want{llm.KindUnavailable, backoff, true, down, down, "unavailable", "the model provider is having trouble", "…"}},
		{"connection refused", refused,
			want{llm.KindUnreachable, backoff, true, down, down, "unavailable", "cannot reach 127.0.0.1:…",
				"⚠️ The model provider did not answer: cannot reach 127.0.0.1:…"}},
		{"a transport error after connecting", &llm.APIError{Provider: "primary", Type: "transport", Message: "read: EOF", Err: errors.New("EOF")},
			want{llm.KindUnavailable, backoff, true, down, down, "unavailable", "the model provider is having trouble", "…"}},
		{"truncated stream", fmt.Errorf("primary: connection closed mid-stream: %w (%w)", llm.ErrTruncated, errors.New("unexpected EOF")),
			want{llm.KindTruncated, backoff, true, down, down, "unavailable", "the model's answer was cut off",
				"⚠️ The model's answer was cut off. Please try again."}},
		{"stream without a terminal delta", routeErr(llm.ErrIncomplete),
			want{llm.KindTruncated, backoff, true, down, down, "unavailable", "…", "…"}},
		{"400", &llm.APIError{Provider: "primary", Status: 400, Type: "bad_request", Message: "tools[0].name is invalid"},
			want{llm.KindRejected, llm.RetryNo, false, up, up, "rejected", "the model provider rejected the request — primary answered HTTP 400",
				"⚠️ The model provider rejected the request (tools[0].name is invalid)."}},
		{"404 model", &llm.APIError{Provider: "primary", Status: 404},
			want{llm.KindRejected, llm.RetryNo, false, up, up, "rejected", "…", "…"}},
		{"client error inside a stream", &llm.APIError{Provider: "primary", Type: "bad_request", Kind: llm.KindRejected, Message: "bad"},
			want{llm.KindRejected, llm.RetryNo, false, up, up, "rejected", "the model provider rejected the request", "…"}},
		{"context too long", &llm.APIError{Provider: "primary", Status: 400, Type: "too_long", Kind: llm.KindTooLong},
			want{llm.KindTooLong, llm.RetryNo, false, up, up, "rejected", "the conversation is too long for the model — primary answered HTTP 400",
				"⚠️ This conversation is too long for the model. Send /new …"}},
		{"empty answer", routeErr(&llm.AnswerError{Stop: llm.StopEnd}),
			want{llm.KindUnusable, llm.RetryOnce, true, up, up, "unusable", "the model did not answer usably",
				"⚠️ The model sent an empty or broken answer, also when asked again. …"}},
		{"malformed call", &llm.AnswerError{Stop: llm.StopMalformedCall},
			want{llm.KindUnusable, llm.RetryOnce, true, up, up, "unusable", "…", "…"}},
		{"broken delta contract", routeErr(&llm.ContractError{Seq: 3, Reason: "x"}),
			want{llm.KindBroken, llm.RetryNo, false, up, up, "error", "the model's answer stream was broken", "⚠️ Something went wrong …"}},
		{"unknown", errors.New(`unknown route "fast"`),
			want{llm.KindUnknown, llm.RetryNo, false, up, up, "error", "an error the daemon log shows",
				"⚠️ Something went wrong while answering; the details are in the daemon log."}},
		// Several routes failed: the first route's failure decides.
		{"every route failed", fmt.Errorf("every route failed: %w", errors.Join(routeErr(&llm.APIError{Provider: "primary", Status: 502}), &llm.APIError{Status: 401})),
			want{llm.KindUnavailable, backoff, true, down, down, "unavailable", "the model provider is having trouble — primary answered HTTP 502", "…"}},
	}
	seen := map[llm.Kind]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := llm.Classify(tt.err)
			seen[f.Kind] = true
			got := want{f.Kind, f.Retry, f.Fallback, f.Breaker, f.Health, f.Metric, f.SafeReason(), f.UserText()}
			w := tt.want
			if !matches(got.reason, w.reason) {
				w.reason = got.reason + " (want " + w.reason + ")"
			}
			if !matches(got.user, w.user) {
				w.user = got.user + " (want " + w.user + ")"
			}
			got.reason, got.user = w.reason, w.user
			if got != w {
				t.Errorf("Classify(%v)\n got %+v\nwant %+v", tt.err, got, tt.want)
			}
			if strings.Contains(f.SafeReason(), "sk-secret") || strings.Contains(f.UserText(), "sk-secret") {
				t.Errorf("the reason or the user's sentence shows the key: %q / %q", f.SafeReason(), f.UserText())
			}
		})
	}
	if f := llm.Classify(&llm.APIError{Status: 429, RetryAfter: 7 * time.Second}); f.RetryAfter != 7*time.Second {
		t.Errorf("RetryAfter = %s, want the server's 7s", f.RetryAfter)
	}

	stops := []struct {
		stop llm.StopReason
		kind llm.Kind
		user string
		note string
	}{
		{llm.StopLength, llm.KindLength, "⚠️ The model hit its output limit before it wrote an answer. …", "… (cut off: the model hit its output limit)"},
		{llm.StopRefusal, llm.KindRefusal, "⚠️ The model declined to answer this.", "… (the model declined to go on)"},
		{llm.StopSafety, llm.KindSafety, "⚠️ The model provider's safety filter withheld the answer.", "… (stopped by the model provider's safety filter)"},
		{llm.StopRecitation, llm.KindRecitation, "⚠️ The model provider withheld the answer because it would have quoted protected text.",
			"… (stopped: the answer would have quoted protected text)"},
	}
	for _, s := range stops {
		f, ok := llm.ClassifyStop(s.stop)
		seen[f.Kind] = true
		if !ok || f.Kind != s.kind || !matches(f.UserText(), s.user) || f.Note != s.note ||
			f.Retry != llm.RetryNo || f.Fallback || f.Metric != "ok" || f.Health != up {
			t.Errorf("ClassifyStop(%s) = %+v, %v; want kind %s, user %q, note %q, no retry, metric ok", s.stop, f, ok, s.kind, s.user, s.note)
		}
	}
	for _, plain := range []llm.StopReason{"", llm.StopEnd, llm.StopToolCalls, llm.StopOther} {
		if f, ok := llm.ClassifyStop(plain); ok {
			t.Errorf("ClassifyStop(%q) = %s, want a plain answer", plain, f.Kind)
		}
	}

	for _, p := range llm.Policies {
		if !seen[p.Kind] {
			t.Errorf("kind %s is in the table but no case covers it", p.Kind)
		}
	}
}

// TestPoliciesAreConsistent checks the rules every row must keep.
func TestPoliciesAreConsistent(t *testing.T) {
	kinds := map[llm.Kind]bool{}
	for _, p := range llm.Policies {
		if kinds[p.Kind] {
			t.Errorf("kind %s has two rows", p.Kind)
		}
		kinds[p.Kind] = true
		switch {
		case p.Retry == llm.RetryBackoff && (p.Breaker != llm.SignalDown || !p.Fallback):
			t.Errorf("%s: retried with backoff, so the provider looks down: the breaker must count it and the fallbacks follow", p.Kind)
		case p.Breaker == llm.SignalDown && p.Retry != llm.RetryBackoff:
			t.Errorf("%s: the breaker counts only failures whose retries were used up", p.Kind)
		case p.Kind != llm.KindOK && p.User == "":
			t.Errorf("%s: no sentence for the user", p.Kind)
		case p.Reason == "" || p.Metric == "":
			t.Errorf("%s: no safe reason or metric label", p.Kind)
		case (p.Breaker == llm.SignalNone) != (p.Health == llm.SignalNone):
			t.Errorf("%s: a call that proves nothing to the breaker proves nothing to readiness either", p.Kind)
		}
	}
}

// matches compares s to want, which may end in "…" to match a prefix (an
// empty want matches only "").
func matches(s, want string) bool {
	if prefix, ok := strings.CutSuffix(want, "…"); ok {
		return strings.HasPrefix(s, prefix)
	}
	return s == want
}

// TestFailureTableInDocs keeps the copy of the table in docs/routing.md
// true: one row per failure kind (not the answers: ok and the stops), with
// the same retry, fallbacks, breaker, readiness and metric.
func TestFailureTableInDocs(t *testing.T) {
	raw, err := os.ReadFile("../../docs/routing.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[llm.Kind][]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		for i := range cells {
			cells[i] = strings.Trim(strings.TrimSpace(cells[i]), "`")
		}
		if len(cells) == 7 {
			rows[llm.Kind(cells[0])] = cells
		}
	}
	yesNo := map[bool]string{true: "yes", false: "no"}
	for _, p := range llm.Policies {
		if p.Metric == llm.MetricOK {
			continue
		}
		want := []string{string(p.Kind), "", p.Retry.String(), yesNo[p.Fallback], p.Breaker.String(), p.Health.String(), p.Metric}
		got, ok := rows[p.Kind]
		if !ok {
			t.Errorf("docs/routing.md has no row for %s", p.Kind)
			continue
		}
		want[1] = got[1] // which errors: prose
		if !slices.Equal(got, want) {
			t.Errorf("docs/routing.md row for %s:\n got %q\nwant %q", p.Kind, got, want)
		}
		delete(rows, p.Kind)
	}
	for kind := range rows {
		t.Errorf("docs/routing.md has a row for %s, which is not in the table", kind)
	}
}
