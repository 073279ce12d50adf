package usage

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/clock"
)

// Recorder is where model calls are recorded: the Ledger, or on the NATS
// bus the stream every process shares.
type Recorder interface {
	// Record adds one attempt. It prices it (the Cost given is replaced)
	// and counts it before it returns, so a budget check right after sees
	// it.
	Record(ctx context.Context, r Record) error
}

// Reader is what budgets and the surfaces read of a ledger.
type Reader interface {
	Query(q Query) (Report, error)
	// Spent is what scope spent today and this month (local days).
	Spent(scope Scope) Spend
	// Location is the time zone the ledger's days are in.
	Location() *time.Location
	// Now is the ledger's clock.
	Now() time.Time
}

// Scope selects the records a limit counts: the whole daemon (zero), one
// chat or one origin.
type Scope struct {
	Chat   string
	Origin Origin
}

func (s Scope) matches(k groupKey) bool {
	return (s.Chat == "" || s.Chat == k.Chat) && (s.Origin == "" || s.Origin == k.Origin)
}

// Spend is what a scope spent on a date and in its month.
type Spend struct {
	Date  string
	Day   Cost
	Month Cost
}

// Options configure a Ledger. The zero value is usable: UTC days, detail
// kept forever, every record synced, no prices.
type Options struct {
	// Location is the time zone of the ledger's days (budget.timezone).
	Location *time.Location
	// Retention is how long detail files are kept before only their days'
	// sums remain (usage.retention); 0 keeps them.
	Retention time.Duration
	// SyncEvery is how often Run syncs the open detail file
	// (usage.sync_every); 0 syncs each record as it is written.
	SyncEvery time.Duration
	Prices    *PriceTable
	// Clock is the ledger's time [clock.System].
	Clock clock.Clock
	Log   *zap.Logger
}

// Ledger is the usage ledger on disk (see the package doc). It is safe for
// concurrent use.
type Ledger struct {
	dir  string
	opts Options

	mu     sync.Mutex
	days   map[string]dayAgg
	sealed map[string]bool
	// lazy are the days.jsonl lines of days older than residentDays, read
	// on the first query that needs them: a start reads a year's file
	// without decoding it.
	lazy map[string][]span
	// seqs are the NATS stream sequences of the records read at start
	// (today's and unsealed days'), so a replay after a crash does not
	// count them twice (HasSeq).
	seqs    map[uint64]bool
	cur     *os.File // today's detail file, opened on the first record
	curDate string
	// curFrom and curTo bound curDate's day, so that a record of today is
	// dated without formatting its time.
	curFrom, curTo time.Time
	// line is the buffer each detail line is encoded into.
	line []byte
	// modelKeys interns "provider/model", the key of the day's groups, so
	// that counting a record allocates nothing once its group exists.
	modelKeys map[[2]string]string
	dirty     bool
	closed    bool
	hooks     []func(Record)
}

var (
	_ Recorder = (*Ledger)(nil)
	_ Reader   = (*Ledger)(nil)
)

// ErrClosed is returned by Record after Close.
var ErrClosed = errors.New("usage ledger closed")

const (
	daysFile     = "days.jsonl"
	detailPrefix = "detail-"
	detailSuffix = ".jsonl"
)

// Open opens (creating it) the ledger in dir: it reads the days' sums,
// adds up the detail of days not yet summed (today, or a day a crash
// interrupted), sums those past days and deletes detail past the
// retention.
func Open(dir string, opts Options) (*Ledger, error) {
	if opts.Location == nil {
		opts.Location = time.UTC
	}
	if opts.Clock == nil {
		opts.Clock = clock.System{}
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("usage ledger %s: %w", dir, err)
	}
	l := &Ledger{dir: dir, opts: opts, days: map[string]dayAgg{}, sealed: map[string]bool{}, lazy: map[string][]span{}, seqs: map[uint64]bool{}}
	if err := l.load(); err != nil {
		return nil, err
	}
	return l, nil
}

// OnRecord adds fn to what is called after each record is counted (the
// metrics, the budget's warnings). fn must not call Record.
func (l *Ledger) OnRecord(fn func(Record)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hooks = append(l.hooks, fn)
}

// HasSeq reports whether a record of stream sequence seq was read at
// start (usagejs dedupes its replay after a crash with it).
func (l *Ledger) HasSeq(seq uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seqs[seq]
}

// Dir is where the ledger lives.
func (l *Ledger) Dir() string { return l.dir }

// Location is the time zone of the ledger's days.
func (l *Ledger) Location() *time.Location { return l.opts.Location }

// Now is the ledger's clock.
func (l *Ledger) Now() time.Time { return l.opts.Clock.Now() }

func (l *Ledger) date(t time.Time) string { return t.In(l.opts.Location).Format(time.DateOnly) }

// Record prices r, writes it (one write to today's detail file) and counts
// it. A record dated before today (a slow call that began yesterday, or a
// worker's clock) is counted on its own day.
func (l *Ledger) Record(ctx context.Context, r Record) error {
	return l.Apply(ctx, l.Prepare(r))
}

// Prepare fills what a caller may leave out of r (time, origin, outcome)
// and prices it, as Record does before it writes.
func (l *Ledger) Prepare(r Record) Record { return l.prepare(r) }

// Apply writes and counts r as it is, priced already (Prepare): a record
// another process of the NATS bus made (usagejs).
func (l *Ledger) Apply(_ context.Context, r Record) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	date := l.curDate
	if r.Time.Before(l.curFrom) || !r.Time.Before(l.curTo) {
		date = l.date(r.Time)
	}
	err := l.writeLocked(date, r)
	l.addLocked(date, r)
	hooks := l.hooks
	l.mu.Unlock()
	for _, h := range hooks {
		h(r)
	}
	return err
}

// prepare fills what the caller may leave out and prices the record.
func (l *Ledger) prepare(r Record) Record {
	if r.Time.IsZero() {
		r.Time = l.opts.Clock.Now()
	}
	if r.Origin == "" {
		r.Origin = OriginUnknown
	}
	if r.Outcome == "" {
		r.Outcome = OutcomeOK
	}
	r.Cost = l.opts.Prices.Price(r)
	return r
}

// writeLocked puts r on disk: in its day's detail file, or, for a day
// already summed, as a late line of days.jsonl.
func (l *Ledger) writeLocked(date string, r Record) error {
	if l.sealed[date] || (l.curDate != "" && date < l.curDate) {
		return l.appendDayLocked(dayLine{Date: date, Kind: "late", Groups: []groupWire{groupLine{Key: keyOf(r), T: totalsOf(r)}.wire()}})
	}
	if date != l.curDate {
		if err := l.rollLocked(date); err != nil {
			return err
		}
	}
	line, err := appendRecord(l.line[:0], r)
	if err != nil {
		return fmt.Errorf("usage ledger: encode record: %w", err)
	}
	l.line = append(line, '\n')
	if _, err := l.cur.Write(l.line); err != nil {
		return fmt.Errorf("usage ledger: write %s: %w", l.cur.Name(), err)
	}
	if l.opts.SyncEvery <= 0 {
		return l.syncLocked()
	}
	l.dirty = true
	return nil
}

// rollLocked makes date's detail file the open one: the previous day is
// synced, closed and summed into days.jsonl, and detail past the retention
// is deleted.
func (l *Ledger) rollLocked(date string) error {
	if l.cur != nil {
		if err := l.syncLocked(); err != nil {
			return err
		}
		_ = l.cur.Close()
		l.cur = nil
		if err := l.sealLocked(l.curDate); err != nil {
			return err
		}
	}
	f, err := openAppend(l.detailPath(date))
	if err != nil {
		return fmt.Errorf("usage ledger: %w", err)
	}
	l.cur, l.curDate = f, date
	l.curFrom, l.curTo = dayBounds(date, l.opts.Location)
	l.pruneLocked(date)
	return nil
}

func (l *Ledger) addLocked(date string, r Record) {
	agg := l.days[date]
	if agg == nil {
		agg = dayAgg{}
		l.days[date] = agg
	}
	k := groupKey{Chat: r.Chat, Origin: r.Origin, Model: l.modelKeyLocked(r)}
	t := agg[k]
	if t == nil {
		t = &Totals{}
		agg[k] = t
	}
	t.add(r)
}

// modelKeyLocked is r.ModelKey(), interned.
func (l *Ledger) modelKeyLocked(r Record) string {
	pm := [2]string{r.Provider, r.Model}
	if k, ok := l.modelKeys[pm]; ok {
		return k
	}
	if l.modelKeys == nil || len(l.modelKeys) >= maxModelKeys {
		l.modelKeys = map[[2]string]string{}
	}
	k := r.ModelKey()
	l.modelKeys[pm] = k
	return k
}

// maxModelKeys bounds the interned model keys (a worker's records carry
// whatever models it called).
const maxModelKeys = 256

// dayBounds is the local day date in loc: [its 00:00, the next day's).
// The zero times, which bound no record, if date does not parse.
func dayBounds(date string, loc *time.Location) (from, to time.Time) {
	d, err := time.ParseInLocation(time.DateOnly, date, loc)
	if err != nil {
		return time.Time{}, time.Time{}
	}
	y, m, day := d.Date()
	return d, time.Date(y, m, day+1, 0, 0, 0, 0, loc)
}

func keyOf(r Record) groupKey {
	return groupKey{Chat: r.Chat, Origin: r.Origin, Model: r.ModelKey()}
}

func totalsOf(r Record) Totals {
	var t Totals
	t.add(r)
	return t
}

// Sync makes every record written so far durable.
func (l *Ledger) Sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.syncLocked()
}

func (l *Ledger) syncLocked() error {
	if l.cur == nil {
		return nil
	}
	l.dirty = false
	if err := l.cur.Sync(); err != nil {
		return fmt.Errorf("usage ledger: sync %s: %w", l.cur.Name(), err)
	}
	return nil
}

// Run syncs the detail file every SyncEvery while records come in and sums
// a finished day, until ctx ends; then it syncs once more.
func (l *Ledger) Run(ctx context.Context) error {
	if l.opts.SyncEvery <= 0 {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(l.opts.SyncEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := l.Sync(); err != nil {
				l.opts.Log.Warn("usage ledger sync at shutdown failed", zap.Error(err))
			}
			return nil
		case <-t.C:
			if err := l.tick(); err != nil {
				l.opts.Log.Warn("usage ledger sync failed; records since the last sync are not yet durable", zap.Error(err))
			}
		}
	}
}

func (l *Ledger) tick() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	if l.cur != nil && l.curDate < l.date(l.opts.Clock.Now()) {
		return l.rollLocked(l.date(l.opts.Clock.Now()))
	}
	if !l.dirty {
		return nil
	}
	return l.syncLocked()
}

// Close syncs and closes the open file. Records after it fail.
func (l *Ledger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.cur == nil {
		return nil
	}
	err := l.syncLocked()
	return errors.Join(err, l.cur.Close())
}

// Query sums the period's days.
func (l *Ledger) Query(q Query) (Report, error) {
	if q.Period.Dates() == nil {
		return Report{}, fmt.Errorf("usage query: period %s..%s is not a range of dates", q.Period.From, q.Period.To)
	}
	if q.By != ByNone && !slices.Contains(Dimensions, q.By) {
		return Report{}, fmt.Errorf("usage query: cannot group by %q (one of chat, model, origin)", q.By)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ensureLocked(q.Period.Dates())
	return sumDays(l.days, q, l.opts.Location.String()), nil
}

// Spent is what scope spent today and this month.
func (l *Ledger) Spent(scope Scope) Spend {
	now := l.opts.Clock.Now()
	today := l.date(now)
	month := Month(now, l.opts.Location)
	l.mu.Lock()
	defer l.mu.Unlock()
	sp := Spend{Date: today}
	dates := month.Dates()
	l.ensureLocked(dates)
	for _, date := range dates {
		for k, t := range l.days[date] {
			if !scope.matches(k) {
				continue
			}
			sp.Month = sp.Month.Add(t.Cost)
			if date == today {
				sp.Day = sp.Day.Add(t.Cost)
			}
		}
	}
	return sp
}

// dayLine is a line of days.jsonl: a day's sums when it was sealed, or a
// record that came after (late). Lines add up.
type dayLine struct {
	Date   string      `json:"date"`
	Kind   string      `json:"kind"` // seal | late
	Groups []groupWire `json:"groups"`
}

type groupLine struct {
	Key groupKey
	T   Totals
}

// groupWire is a group on disk, in arrays (decoded several times faster
// than objects, for a start or a query over a year of days):
// {"k":[chat,origin,model],"t":[calls,failed,estimated,input,output,
// cache_read,cache_write,reasoning,nanos,unpriced]}.
type groupWire struct {
	K [3]string `json:"k"`
	T [10]int64 `json:"t"`
}

func (g groupLine) wire() groupWire {
	t := g.T
	return groupWire{
		K: [3]string{g.Key.Chat, string(g.Key.Origin), g.Key.Model},
		T: [10]int64{t.Calls, t.Failed, t.Estimated, t.Input, t.Output, t.CacheRead, t.CacheWrite, t.Reasoning, t.Cost.nanos, t.Cost.unpriced},
	}
}

func (w groupWire) line() groupLine {
	return groupLine{
		Key: groupKey{Chat: w.K[0], Origin: Origin(w.K[1]), Model: w.K[2]},
		T: Totals{Calls: w.T[0], Failed: w.T[1], Estimated: w.T[2], Input: w.T[3], Output: w.T[4], CacheRead: w.T[5],
			CacheWrite: w.T[6], Reasoning: w.T[7], Cost: Cost{nanos: w.T[8], unpriced: w.T[9]}},
	}
}

// sealLocked appends date's sums to days.jsonl (synced): from then on a
// start reads them there, not the detail file.
func (l *Ledger) sealLocked(date string) error {
	if l.sealed[date] {
		return nil
	}
	// The sums come from the day's file, not memory: another process
	// writing the same ledger (nanobot agent beside the gateway) adds its
	// records there too, and whichever seals first writes what both would.
	if _, err := os.Stat(l.detailPath(date)); err == nil {
		agg := dayAgg{}
		if err := readLines(l.detailPath(date), l.opts.Log, func(b []byte) error {
			var r Record
			if err := json.Unmarshal(b, &r); err != nil {
				return err
			}
			k := keyOf(r)
			if agg[k] == nil {
				agg[k] = &Totals{}
			}
			agg[k].add(r)
			return nil
		}); err != nil {
			return err
		}
		l.days[date] = agg
	}
	line := dayLine{Date: date, Kind: "seal"}
	for k, t := range l.days[date] {
		line.Groups = append(line.Groups, groupLine{Key: k, T: *t}.wire())
	}
	slices.SortFunc(line.Groups, func(a, b groupWire) int { return slices.Compare(a.K[:], b.K[:]) })
	if err := l.appendDayLocked(line); err != nil {
		return err
	}
	l.sealed[date] = true
	return nil
}

func (l *Ledger) appendDayLocked(line dayLine) error {
	b, err := json.Marshal(line)
	if err != nil {
		return fmt.Errorf("usage ledger: encode day %s: %w", line.Date, err)
	}
	f, err := openAppend(filepath.Join(l.dir, daysFile))
	if err != nil {
		return fmt.Errorf("usage ledger: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

func (l *Ledger) detailPath(date string) string {
	return filepath.Join(l.dir, detailPrefix+date+detailSuffix)
}

// pruneLocked deletes the detail files of summed days older than the
// retention, counted back from today.
func (l *Ledger) pruneLocked(today string) {
	if l.opts.Retention <= 0 {
		return
	}
	t, err := time.Parse(time.DateOnly, today)
	if err != nil {
		return
	}
	cutoff := t.Add(-l.opts.Retention).Format(time.DateOnly)
	for _, date := range l.detailDates() {
		if date < cutoff && l.sealed[date] {
			if err := os.Remove(l.detailPath(date)); err != nil && !errors.Is(err, os.ErrNotExist) {
				l.opts.Log.Warn("cannot delete old usage detail", zap.String("date", date), zap.Error(err))
			}
		}
	}
}

// detailDates lists the dates of the detail files, sorted.
func (l *Ledger) detailDates() []string {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(name, detailPrefix) || !strings.HasSuffix(name, detailSuffix) {
			continue
		}
		date := strings.TrimSuffix(strings.TrimPrefix(name, detailPrefix), detailSuffix)
		if _, err := time.Parse(time.DateOnly, date); err == nil {
			out = append(out, date)
		}
	}
	slices.Sort(out)
	return out
}

// residentDays is how far back days are decoded at start: the month, the
// week and the panel's 30-day chart, with room to spare.
const residentDays = 35

// span is one line of days.jsonl, by offset and length.
type span struct{ off, n int64 }

// load reads days.jsonl, then adds up the detail of unsealed days and
// seals those before today. Lines of days older than residentDays are only
// indexed (lazy).
func (l *Ledger) load() error {
	unsealed, err := l.read()
	if err != nil {
		return err
	}
	today := l.date(l.opts.Clock.Now())
	for _, date := range unsealed {
		if date < today {
			if err := l.sealLocked(date); err != nil {
				return err
			}
		}
	}
	l.pruneLocked(today)
	return nil
}

// read indexes days.jsonl (decoding the resident days), adds up the detail
// of the days it has not sealed, and returns those days. It writes nothing
// (OpenReadOnly).
func (l *Ledger) read() (unsealed []string, err error) {
	now := l.opts.Clock.Now()
	resident := l.date(now.AddDate(0, 0, -residentDays))
	if err := readSpans(filepath.Join(l.dir, daysFile), l.opts.Log, func(b []byte, sp span) error {
		date, seal, ok := peekDay(b)
		if !ok {
			return l.decodeDay(b)
		}
		if seal {
			if l.sealed[date] {
				return nil // sealed again by a second process: the first line holds the day
			}
			l.sealed[date] = true
		}
		if date < resident {
			l.lazy[date] = append(l.lazy[date], sp)
			return nil
		}
		return l.decodeDay(b)
	}); err != nil {
		return nil, err
	}
	for _, date := range l.detailDates() {
		if l.sealed[date] {
			continue
		}
		if err := readLines(l.detailPath(date), l.opts.Log, func(b []byte) error {
			var r Record
			if err := json.Unmarshal(b, &r); err != nil {
				return err
			}
			l.addLocked(date, r)
			if r.Seq > 0 {
				l.seqs[r.Seq] = true
			}
			return nil
		}); err != nil {
			return nil, err
		}
		unsealed = append(unsealed, date)
	}
	return unsealed, nil
}

// peekDay reads a days.jsonl line's date and kind without decoding it:
// the ledger writes them first, as {"date":"2006-01-02","kind":"seal",...}.
func peekDay(b []byte) (date string, seal, ok bool) {
	const head = `{"date":"`
	if len(b) < len(head)+10 || string(b[:len(head)]) != head {
		return "", false, false
	}
	date = string(b[len(head) : len(head)+10])
	if _, err := time.Parse(time.DateOnly, date); err != nil {
		return "", false, false
	}
	return date, bytes.HasPrefix(b[len(head)+10:], []byte(`","kind":"seal"`)), true
}

// decodeDay adds one days.jsonl line to the sums.
func (l *Ledger) decodeDay(b []byte) error {
	var line dayLine
	if err := json.Unmarshal(b, &line); err != nil {
		return err
	}
	if _, err := time.Parse(time.DateOnly, line.Date); err != nil {
		return fmt.Errorf("date %q: %w", line.Date, err)
	}
	agg := l.days[line.Date]
	if agg == nil {
		agg = dayAgg{}
		l.days[line.Date] = agg
	}
	for _, w := range line.Groups {
		g := w.line()
		t := agg[g.Key]
		if t == nil {
			t = &Totals{}
			agg[g.Key] = t
		}
		*t = t.Add(g.T)
	}
	if line.Kind == "seal" {
		l.sealed[line.Date] = true
	}
	return nil
}

// ensureLocked decodes the lazy lines of dates; a line that cannot be read
// is logged and its day counts what the rest say.
func (l *Ledger) ensureLocked(dates []string) {
	var f *os.File
	defer func() {
		if f != nil {
			_ = f.Close()
		}
	}()
	for _, date := range dates {
		spans, ok := l.lazy[date]
		if !ok {
			continue
		}
		delete(l.lazy, date)
		if f == nil {
			var err error
			if f, err = os.Open(filepath.Join(l.dir, daysFile)); err != nil {
				l.opts.Log.Warn("usage ledger: cannot read old days", zap.Error(err))
				return
			}
		}
		for _, sp := range spans {
			b := make([]byte, sp.n)
			if _, err := f.ReadAt(b, sp.off); err != nil {
				l.opts.Log.Warn("usage ledger: cannot read a day", zap.String("date", date), zap.Error(err))
				continue
			}
			if err := l.decodeDay(b); err != nil {
				l.opts.Log.Warn("usage ledger: dropping a day's line that does not decode", zap.String("date", date), zap.Error(err))
			}
		}
	}
}

// readLines calls fn with each line of path (none if it does not exist).
// A line that does not decode is dropped with a warning: a torn last line
// after a crash, or a damaged one, never makes the ledger unusable.
func readLines(path string, log *zap.Logger, fn func([]byte) error) error {
	return readSpans(path, log, func(b []byte, _ span) error { return fn(b) })
}

// readSpans is readLines with each line's place in the file.
func readSpans(path string, log *zap.Logger, fn func([]byte, span) error) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("usage ledger: %w", err)
	}
	defer func() { _ = f.Close() }()
	r := bufio.NewReaderSize(f, 64<<10)
	var off int64
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		sp := span{off: off, n: int64(len(line))}
		off += sp.n
		if len(bytes.TrimSpace(line)) > 0 {
			if ferr := fn(line, sp); ferr != nil {
				log.Warn("usage ledger: dropping a line that does not decode", zap.String("file", path), zap.Int("line", n), zap.Error(ferr))
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("usage ledger: read %s: %w", path, err)
		}
	}
}

// openAppend opens path for appending, creating it, and cuts a torn last
// line (no final newline, left by a crash mid-write) so the next line
// starts clean.
func openAppend(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := cutTornTail(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// cutTornTail truncates f after its last newline.
func cutTornTail(f *os.File) error {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return err
	}
	size := st.Size()
	buf := make([]byte, 4096)
	for end := size; end > 0; {
		start := max(end-int64(len(buf)), 0)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			keep := start + int64(i) + 1
			if keep == size {
				return nil
			}
			return f.Truncate(keep)
		}
		end = start
	}
	return f.Truncate(0)
}
