package channels

import "container/list"

// lru is a bounded map that forgets its least recently used entries. It is
// not safe for concurrent use; its owner locks.
type lru[K comparable, V any] struct {
	max   int
	order *list.List // front = most recent; values are *lruEntry
	items map[K]*list.Element
}

type lruEntry[K comparable, V any] struct {
	key K
	val V
}

func newLRU[K comparable, V any](max int) *lru[K, V] {
	return &lru[K, V]{max: max, order: list.New(), items: map[K]*list.Element{}}
}

// get returns the value for k and marks it recently used.
func (c *lru[K, V]) get(k K) (V, bool) {
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*lruEntry[K, V]).val, true
	}
	var zero V
	return zero, false
}

// put stores v under k, evicting the oldest entry when full.
func (c *lru[K, V]) put(k K, v V) {
	if e, ok := c.items[k]; ok {
		e.Value.(*lruEntry[K, V]).val = v
		c.order.MoveToFront(e)
		return
	}
	c.items[k] = c.order.PushFront(&lruEntry[K, V]{k, v})
	if c.order.Len() > c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.items, old.Value.(*lruEntry[K, V]).key)
	}
}

func (c *lru[K, V]) len() int { return c.order.Len() }
