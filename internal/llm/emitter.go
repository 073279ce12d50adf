package llm

// Emitter keeps the Delta contract for an adapter that parses a wire stream
// itself: it numbers the deltas, sends DeltaStart before anything else, and
// remembers whether the consumer stopped or a terminal delta went out, so
// nothing is ever yielded after either.
type Emitter struct {
	yield   func(Delta) bool
	meta    Meta
	seq     int
	started bool
	ended   bool
	stopped bool
}

// NewEmitter returns an emitter yielding to yield; meta goes with the start.
func NewEmitter(yield func(Delta) bool, meta Meta) *Emitter {
	return &Emitter{yield: yield, meta: meta}
}

// Start sends the start delta unless it went out already; false means stop
// reading.
func (e *Emitter) Start() bool {
	if e.started {
		return !e.Done()
	}
	e.started = true
	m := e.meta
	return e.send(Delta{Kind: DeltaStart, Meta: &m})
}

// SetModel names the model that answers, for a stream that says so in its
// first event; it only matters before the start went out.
func (e *Emitter) SetModel(model string) { e.meta.Model = model }

// Emit sends d, preceded by the start if needed; false means stop reading.
func (e *Emitter) Emit(d Delta) bool {
	if e.Done() {
		return false
	}
	if !e.started && !e.Start() {
		return false
	}
	return e.send(d)
}

// Fail ends the stream with err (a no-op once it ended).
func (e *Emitter) Fail(err error) { e.Emit(Delta{Kind: DeltaError, Err: err}) }

// Done reports whether no more deltas may be sent: a terminal one went out
// or the consumer stopped.
func (e *Emitter) Done() bool { return e.ended || e.stopped }

func (e *Emitter) send(d Delta) bool {
	e.seq++
	d.Seq = e.seq
	if d.Kind.Terminal() {
		e.ended = true
	}
	if !e.yield(d) {
		e.stopped = true
		return false
	}
	return !e.ended
}
