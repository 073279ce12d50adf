package session

import (
	"container/list"
	"errors"
	"fmt"
	"sync"

	"go.uber.org/zap"
)

// Loaded is one session as a store holds it in a Cache: the file Store's
// open file and messages, jsstore's records read from the stream. Its
// methods are called with the entry's lock held.
type Loaded interface {
	// Weight is the session's Weight as loaded now; 0 while nothing is.
	Weight() int64
	// Drop releases what the entry holds besides memory (the file Store
	// closes its file) as it leaves the cache: evicted, or the cache closed.
	Drop() error
}

// Cache holds the loaded sessions of a store, whatever its backend: at most
// one entry per key, each with its own lock, so calls for different keys
// run in parallel and calls for one key are serialised. It is a least
// recently used cache bounded by count and by weight (Options.CacheSize
// and CacheBytes); an entry is only dropped while no call uses it, so
// nobody is using what Drop releases.
type Cache[E Loaded] struct {
	size     int
	bytes    int64
	newEntry func(key string) E
	log      *zap.Logger

	mu      sync.Mutex
	closed  bool
	entries map[string]*cached[E]
	lru     list.List // of *cached[E], most recently used at the front
	// weight is the sum of the entries' weights: what the cache holds,
	// as CacheBytes counts it.
	weight int64
}

// cached is one entry of a Cache. key, elem, refs and weight belong to
// Cache.mu; dead and val to mu.
type cached[E Loaded] struct {
	key  string
	elem *list.Element
	refs int
	// weight is the session's Weight when its last use ended.
	weight int64

	mu   sync.Mutex
	dead bool // the cache was closed
	val  E
}

// NewCache returns an empty cache that keeps at most size idle entries
// weighing at most bytes together; newEntry makes a key's entry on its
// first use.
func NewCache[E Loaded](size int, bytes int64, newEntry func(key string) E, log *zap.Logger) *Cache[E] {
	return &Cache[E]{size: size, bytes: bytes, newEntry: newEntry, log: log, entries: make(map[string]*cached[E])}
}

// Use runs fn on key's entry, creating it, with the entry's lock held, and
// then records its weight. It returns ErrClosed once Close has begun, and
// fn's error as it is.
func (c *Cache[E]) Use(key string, fn func(E) error) error {
	e, err := c.acquire(key)
	if err != nil {
		return err
	}
	// Deferred in this order, the weight is read under e's lock, after fn
	// changed the session, and then handed to the cache.
	var weight int64
	defer func() { c.release(e, weight) }()
	e.mu.Lock()
	defer func() {
		weight = e.val.Weight()
		e.mu.Unlock()
	}()
	if e.dead {
		return ErrClosed
	}
	return fn(e.val)
}

// Len reports how many sessions are loaded, for metrics.
func (c *Cache[E]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Weight reports what the loaded sessions weigh together (see Weight).
func (c *Cache[E]) Weight() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.weight
}

// Close drops every entry, waiting for calls in progress; later calls fail
// with ErrClosed. It returns what dropping the entries returned.
func (c *Cache[E]) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	es := make([]*cached[E], 0, len(c.entries))
	for _, e := range c.entries {
		es = append(es, e)
	}
	clear(c.entries)
	c.lru.Init()
	c.weight = 0
	c.mu.Unlock()

	var errs []error
	for _, e := range es {
		e.mu.Lock()
		e.dead = true
		if err := e.val.Drop(); err != nil {
			errs = append(errs, fmt.Errorf("session %s: close: %w", e.key, err))
		}
		e.mu.Unlock()
	}
	return errors.Join(errs...)
}

// acquire returns the entry for key, creating it, marks it in use and most
// recently used, and evicts idle entries beyond the cache's bounds.
func (c *Cache[E]) acquire(key string) (*cached[E], error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	e := c.entries[key]
	if e == nil {
		e = &cached[E]{key: key, val: c.newEntry(key)}
		e.elem = c.lru.PushFront(e)
		c.entries[key] = e
	} else {
		c.lru.MoveToFront(e.elem)
	}
	e.refs++
	victims := c.evictLocked()
	c.mu.Unlock()
	c.drop(victims)
	return e, nil
}

// release ends a use of e begun by acquire, recording the weight e has now.
func (c *Cache[E]) release(e *cached[E], weight int64) {
	c.mu.Lock()
	e.refs--
	if c.entries[e.key] == e { // not dropped by Close meanwhile
		c.weight += weight - e.weight
		e.weight = weight
	}
	victims := c.evictLocked()
	c.mu.Unlock()
	c.drop(victims)
}

// evictLocked removes idle entries from the LRU end until the cache fits
// both its count and its bytes. Entries in use are skipped, so the cache
// may briefly exceed either when more (or bigger) sessions than that are
// busy at once; a single session over the bytes is dropped as soon as its
// use ends, and read again next time.
func (c *Cache[E]) evictLocked() []*cached[E] {
	var victims []*cached[E]
	for el := c.lru.Back(); el != nil && (len(c.entries) > c.size || c.weight > c.bytes); {
		e := el.Value.(*cached[E])
		prev := el.Prev()
		if e.refs == 0 {
			c.lru.Remove(el)
			delete(c.entries, e.key)
			c.weight -= e.weight
			victims = append(victims, e)
		}
		el = prev
	}
	return victims
}

// drop releases what evicted entries hold. Nobody else holds them, so the
// lock is only taken to keep the race detector's view simple.
func (c *Cache[E]) drop(victims []*cached[E]) {
	for _, e := range victims {
		e.mu.Lock()
		if err := e.val.Drop(); err != nil {
			c.log.Warn("dropping an evicted session", zap.String("session", e.key), zap.Error(err))
		}
		e.mu.Unlock()
	}
}
