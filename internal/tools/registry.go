package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/logging"
)

// RegistryOptions configure a Registry.
type RegistryOptions struct {
	// Timeout bounds one call (agents.tool_timeout). Tools with their
	// own, shorter limit (exec) report that one first.
	Timeout time.Duration
	// MaxOutput caps a result's text in characters
	// (agents.max_tool_output); the middle of longer text is cut.
	MaxOutput int
	// Redact, when set, rewrites every result's text before the model sees
	// it: the daemon removes its own tokens and keys, so a file or command
	// output that holds one never reaches the session or the chat.
	Redact func(string) string
	// Observer is told about every call, for metrics [nothing is].
	Observer Observer
}

// Observer is told about each finished tool call. Name is UnknownTool for a
// call of a tool that is not registered (the model made the name up), so the
// set of names an observer sees stays bounded. It must be cheap and safe for
// concurrent use.
type Observer interface {
	ToolCall(name string, isError bool, elapsed time.Duration)
}

// UnknownTool is the name the Observer sees for calls of unregistered tools.
const UnknownTool = "unknown"

// toolNamePattern is what OpenAI and Anthropic both accept as a function
// name, in at most 64 characters (validToolName). The length is checked
// apart: {1,64} in the pattern would compile into a program many times
// larger, at start (sizes: docs/BENCHMARKS.md#figures-behind-code-choices).
var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

func validToolName(s string) bool { return len(s) <= 64 && toolNamePattern.MatchString(s) }

// Registry holds the tools offered to the model and runs their calls. It is
// safe for concurrent use; tools may be registered and removed while calls
// run (MCP servers come and go).
type Registry struct {
	set    *toolSet
	hidden map[string]bool // names this view leaves out; never modified
	opts   RegistryOptions
	log    *zap.Logger
	// specs caches this view's Specs for one generation of the set: every
	// turn asks for them, and they change only when a tool comes or goes.
	specs atomic.Pointer[specsCache]
}

// specsCache is a view's sorted specs as of set generation gen.
type specsCache struct {
	gen   uint64
	specs []llm.ToolSpec
}

// toolSet is the state shared by a registry and the views made from it.
type toolSet struct {
	mu      sync.RWMutex
	entries map[string]*entry
	// gen counts changes to entries; it is written under mu (held for
	// writing), so a generation read under mu matches entries.
	gen   atomic.Uint64
	calls tracker
}

type entry struct {
	tool Tool
	// spec is taken once at registration, with its schema compacted, so the
	// specs sent to the model are byte-identical between turns.
	spec   llm.ToolSpec
	schema *argSchema
}

// RegistryLimits is the registry's part of the agent settings
// (agents.tool_timeout, agents.max_tool_output): the one mapping from
// config, used by the daemon and, with config.Defaults(), by tests.
func RegistryLimits(a config.AgentsConfig) RegistryOptions {
	return RegistryOptions{Timeout: a.ToolTimeout, MaxOutput: a.MaxToolOutput}
}

// NewRegistry returns an empty registry. Timeout and MaxOutput are taken as
// given (RegistryLimits maps them from config); it defaults neither.
func NewRegistry(opts RegistryOptions, log *zap.Logger) *Registry {
	return &Registry{
		set:  &toolSet{entries: map[string]*entry{}},
		opts: opts,
		log:  log,
	}
}

// Register adds t. It fails if the name is invalid or taken, or the
// parameters are not a usable JSON schema of an object.
func (r *Registry) Register(t Tool) error {
	spec := t.Spec()
	if !validToolName(spec.Name) {
		return fmt.Errorf("register tool %q: name must be 1-64 letters, digits, _ or -", spec.Name)
	}
	if len(spec.Parameters) == 0 {
		spec.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, spec.Parameters); err != nil {
		return fmt.Errorf("register tool %s: parameters: %w", spec.Name, err)
	}
	spec.Parameters = json.RawMessage(compact.Bytes())
	schema, err := compileSchema(spec.Parameters)
	if err != nil {
		return fmt.Errorf("register tool %s: %w", spec.Name, err)
	}
	r.set.mu.Lock()
	defer r.set.mu.Unlock()
	if _, dup := r.set.entries[spec.Name]; dup {
		return fmt.Errorf("register tool %s: a tool of that name is already registered", spec.Name)
	}
	r.set.entries[spec.Name] = &entry{tool: t, spec: spec, schema: schema}
	r.set.gen.Add(1)
	return nil
}

// Unregister removes the tool called name, if present. Calls already running
// finish normally.
func (r *Registry) Unregister(name string) {
	r.set.mu.Lock()
	defer r.set.mu.Unlock()
	if _, ok := r.set.entries[name]; ok {
		delete(r.set.entries, name)
		r.set.gen.Add(1)
	}
}

// Has reports whether a tool called name is available in this registry.
func (r *Registry) Has(name string) bool { return r.lookup(name) != nil }

// ReadOnly reports whether the tool called name is available and read-only,
// so that several of its calls in one turn may run in parallel.
func (r *Registry) ReadOnly(name string) bool {
	e := r.lookup(name)
	return e != nil && IsReadOnly(e.tool)
}

// Specs returns the specs of the available tools sorted by name, so that the
// same tools give byte-identical prompts (and the provider's prompt cache
// stays warm).
//
// The slice is shared: every call returns the same one until a tool is
// registered or removed, so callers must not modify its elements (clone it
// first). Its capacity is its length, so appending to it copies. That the
// slice stays the same lets callers key their own caches on it.
func (r *Registry) Specs() []llm.ToolSpec {
	// A hit takes no lock: a cache of the current generation was built
	// from the entries of that generation.
	if c := r.specs.Load(); c != nil && c.gen == r.set.gen.Load() {
		return c.specs
	}
	r.set.mu.RLock()
	defer r.set.mu.RUnlock()
	gen := r.set.gen.Load()
	if c := r.specs.Load(); c != nil && c.gen == gen {
		return c.specs
	}
	specs := make([]llm.ToolSpec, 0, len(r.set.entries))
	for name, e := range r.set.entries {
		if !r.hidden[name] {
			specs = append(specs, e.spec)
		}
	}
	slices.SortFunc(specs, func(a, b llm.ToolSpec) int { return strings.Compare(a.Name, b.Name) })
	specs = slices.Clip(specs)
	// Readers racing here build the same specs for the same generation;
	// whichever stores last wins, and the generation cannot move while
	// the read lock is held.
	r.specs.Store(&specsCache{gen: gen, specs: specs})
	return specs
}

// Without returns a view of r without the named tools, e.g. for subagents
// (no message, spawn or cron). The view shares r's tools: tools registered
// or removed later, through r or the view, show in both, except the hidden
// names.
func (r *Registry) Without(names ...string) *Registry {
	hidden := make(map[string]bool, len(r.hidden)+len(names))
	for n := range r.hidden {
		hidden[n] = true
	}
	for _, n := range names {
		hidden[n] = true
	}
	return &Registry{set: r.set, hidden: hidden, opts: r.opts, log: r.log}
}

// Wait blocks until every call started through this registry or its views
// has returned, including calls abandoned after their timeout, or until ctx
// ends. The daemon calls it at shutdown so no tool outlives it.
func (r *Registry) Wait(ctx context.Context) error { return r.set.calls.wait(ctx) }

func (r *Registry) lookup(name string) *entry {
	if r.hidden[name] {
		return nil
	}
	r.set.mu.RLock()
	defer r.set.mu.RUnlock()
	return r.set.entries[name]
}

func (r *Registry) names() []string {
	specs := r.Specs()
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return names
}

// Execute runs one tool call and always returns its result; it never
// panics. Unknown tools, arguments that did not parse, arguments that do not
// fit the schema, timeouts and panics all become error results that tell
// the model what went wrong. Text beyond MaxOutput characters is cut in the
// middle with a marker.
func (r *Registry) Execute(ctx context.Context, call llm.ToolCall, origin Origin) (res llm.ToolResult) {
	start := time.Now()
	log := logging.From(ctx, r.log)
	res = llm.ToolResult{ToolCallID: call.ID, Name: call.Name}
	defer func() {
		// Execute's own code should not panic either; if it does, the call
		// still gets its result (every call has exactly one; see
		// docs/history.md#projection).
		if p := recover(); p != nil {
			log.Error("tool call panicked outside the tool", zap.String("tool", call.Name),
				zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
			res.IsError = true
			res.Content = llm.PlainContent(fmt.Sprintf("Error: %s failed unexpectedly: internal error", call.Name))
		}
		res.Elapsed = time.Since(start)
		if o := r.opts.Observer; o != nil {
			name := call.Name
			if r.lookup(name) == nil {
				name = UnknownTool
			}
			o.ToolCall(name, res.IsError, res.Elapsed)
		}
	}()

	out := r.execute(ctx, call, origin)
	text := out.Text
	if text == "" && len(out.Images) == 0 {
		text = "(no output)"
	}
	if r.opts.Redact != nil {
		text = r.opts.Redact(text)
	}
	text, cut := capMiddle(text, r.opts.MaxOutput)
	if cut > 0 {
		log.Debug("tool output cut", zap.String("tool", call.Name), zap.Int("cut_chars", cut))
	}
	res.IsError = out.IsError
	res.Content = llm.PlainContent(text)
	res.Images = out.Images
	log.Debug("tool call", zap.String("tool", call.Name), zap.String("call_id", call.ID),
		zap.Bool("is_error", out.IsError), zap.Duration("elapsed", time.Since(start)))
	return res
}

func (r *Registry) execute(ctx context.Context, call llm.ToolCall, origin Origin) Result {
	e := r.lookup(call.Name)
	if e == nil {
		available := "No tools are available."
		if names := r.names(); len(names) > 0 {
			available = "Available tools: " + strings.Join(names, ", ") + "."
		}
		return errorResult(fmt.Sprintf("Error: unknown tool %q. %s", clip(call.Name, 100), available))
	}
	if call.ParseError != "" {
		return errorResult(fmt.Sprintf("Error: the arguments of this %s call are not valid JSON (%s), so it was not run. "+
			"Call it again with one JSON object matching its parameters. Received: %s",
			call.Name, call.ParseError, clip(call.RawArgs, 200)))
	}
	args, err := e.schema.prepare(call.Arguments)
	if err != nil {
		return errorResult(fmt.Sprintf("Error: invalid arguments for %s: %v. The tool was not run.", call.Name, err))
	}
	return r.run(ctx, e, Invocation{CallID: call.ID, Args: args, Origin: origin})
}

// run calls the tool under the timeout. The tool runs in its own goroutine
// so that a tool ignoring its context cannot hold the turn past the timeout;
// such a goroutine is left to finish on its own, counted so Wait can wait
// for it.
func (r *Registry) run(parent context.Context, e *entry, inv Invocation) Result {
	ctx, cancel := context.WithTimeout(parent, r.opts.Timeout)
	defer cancel()
	done := make(chan Result, 1)
	r.set.calls.add()
	go func() {
		defer r.set.calls.done()
		done <- r.safeRun(ctx, e, inv)
	}()
	select {
	case res := <-done:
		return res
	case <-ctx.Done():
	}
	// A result that arrived together with the deadline still counts.
	select {
	case res := <-done:
		return res
	default:
	}
	if parent.Err() == nil {
		logging.From(parent, r.log).Warn("tool call timed out", zap.String("tool", e.spec.Name), zap.Duration("timeout", r.opts.Timeout))
	}
	return r.stopped(e.spec.Name, ctx.Err())
}

// stopped is the result of a call whose context ended: cancelled (the turn
// was stopped) or timed out.
func (r *Registry) stopped(name string, cause error) Result {
	if errors.Is(cause, context.Canceled) {
		return errorResult(fmt.Sprintf("Error: %s was cancelled before it finished.", name))
	}
	return errorResult(fmt.Sprintf("Error: %s timed out after %s and was abandoned; "+
		"try a smaller request or another approach.", name, r.opts.Timeout))
}

// safeRun runs the tool, turning an error or a panic into an error result.
func (r *Registry) safeRun(ctx context.Context, e *entry, inv Invocation) (res Result) {
	name := e.spec.Name
	defer func() {
		if p := recover(); p != nil {
			logging.From(ctx, r.log).Error("tool panicked", zap.String("tool", name), zap.Any("panic", p),
				zap.ByteString("stack", debug.Stack()))
			res = errorResult(fmt.Sprintf("Error: %s failed unexpectedly (internal error: %v).", name, p))
		}
	}()
	res, err := e.tool.Run(ctx, inv)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return r.stopped(name, ctx.Err())
		}
		return errorResult("Error: " + err.Error())
	}
	return res
}

// clip shortens s to at most n bytes (on a rune boundary) with "..." after.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// tracker counts running calls and lets Wait block until none are left,
// without a goroutine of its own.
type tracker struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0
}

func (t *tracker) add() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		t.idle = make(chan struct{})
	}
	t.n++
}

func (t *tracker) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.n == 0 {
		close(t.idle)
	}
}

func (t *tracker) wait(ctx context.Context) error {
	t.mu.Lock()
	if t.n == 0 {
		t.mu.Unlock()
		return nil
	}
	idle := t.idle
	t.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
