package usage

import (
	"math"
	"regexp"
	"strings"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// Price is what a model costs, in USD per million tokens (and per minute
// of audio for a transcription model billed by duration).
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read"`
	CacheWrite float64 `json:"cache_write"`
	// PerMinute prices audio by its length (whisper-1); 0 for token-billed
	// models.
	PerMinute float64 `json:"per_minute,omitempty"`
}

// Cost is what tokens (and seconds of audio) cost at p. Input tokens are
// those neither read from nor written to the cache (llm.Usage's meaning in
// every adapter); reasoning tokens are part of the output and not priced
// again.
func (p Price) Cost(t llm.Usage, audioSeconds float64) Cost {
	// Prices per million tokens × tokens = micro-dollars; ×1000 = nanos.
	n := float64(t.InputTokens)*p.Input + float64(t.OutputTokens)*p.Output +
		float64(t.CacheReadTokens)*p.CacheRead + float64(t.CacheWriteTokens)*p.CacheWrite
	n *= 1000
	n += audioSeconds / 60 * p.PerMinute * 1e9
	return Cost{nanos: int64(math.Round(n))}
}

// PricesAsOf is when DefaultPrices were taken from the vendors' public
// price pages (list prices, standard tier, prompts under 200k tokens).
const PricesAsOf = "October 2025"

// DefaultPrices are the list prices of the common models of each provider,
// keyed by route model, as of PricesAsOf; transcriptions are keyed
// "transcription/<model>" (channels.transcription is not a route). OpenAI bills no cache writes;
// Gemini bills cache storage by the hour, which a call's tokens cannot
// show, so their cache_write is 0. The configuration's prices: override
// them one model at a time.
var DefaultPrices = map[string]Price{
	"openai/gpt-5":                         {Input: 1.25, Output: 10, CacheRead: 0.125},
	"openai/gpt-5-mini":                    {Input: 0.25, Output: 2, CacheRead: 0.025},
	"openai/gpt-5-nano":                    {Input: 0.05, Output: 0.40, CacheRead: 0.005},
	"openai/gpt-4.1":                       {Input: 2, Output: 8, CacheRead: 0.50},
	"openai/gpt-4.1-mini":                  {Input: 0.40, Output: 1.60, CacheRead: 0.10},
	"openai/gpt-4.1-nano":                  {Input: 0.10, Output: 0.40, CacheRead: 0.025},
	"openai/gpt-4o":                        {Input: 2.50, Output: 10, CacheRead: 1.25},
	"openai/gpt-4o-mini":                   {Input: 0.15, Output: 0.60, CacheRead: 0.075},
	"openai/o3":                            {Input: 2, Output: 8, CacheRead: 0.50},
	"openai/o4-mini":                       {Input: 1.10, Output: 4.40, CacheRead: 0.275},
	"openai/o3-mini":                       {Input: 1.10, Output: 4.40, CacheRead: 0.55},
	"transcription/whisper-1":              {PerMinute: 0.006},
	"transcription/gpt-4o-transcribe":      {Input: 2.50, Output: 10},
	"transcription/gpt-4o-mini-transcribe": {Input: 1.25, Output: 5},

	"anthropic/claude-opus-4-1":   {Input: 15, Output: 75, CacheRead: 1.50, CacheWrite: 18.75},
	"anthropic/claude-opus-4-0":   {Input: 15, Output: 75, CacheRead: 1.50, CacheWrite: 18.75},
	"anthropic/claude-sonnet-4-5": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"anthropic/claude-sonnet-4-0": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"anthropic/claude-3-7-sonnet": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"anthropic/claude-haiku-4-5":  {Input: 1, Output: 5, CacheRead: 0.10, CacheWrite: 1.25},
	"anthropic/claude-3-5-haiku":  {Input: 0.80, Output: 4, CacheRead: 0.08, CacheWrite: 1},

	"gemini/gemini-2.5-pro":        {Input: 1.25, Output: 10, CacheRead: 0.31},
	"gemini/gemini-2.5-flash":      {Input: 0.30, Output: 2.50, CacheRead: 0.075},
	"gemini/gemini-2.5-flash-lite": {Input: 0.10, Output: 0.40, CacheRead: 0.025},
	"gemini/gemini-2.0-flash":      {Input: 0.10, Output: 0.40, CacheRead: 0.025},
}

// PriceTable finds the price of a route model. It is read-only once built
// and safe for concurrent use.
type PriceTable struct {
	prices map[string]Price
}

// NewPriceTable is DefaultPrices with overrides on top (the
// configuration's prices:, keyed by route model).
func NewPriceTable(overrides map[string]Price) *PriceTable {
	m := make(map[string]Price, len(DefaultPrices)+len(overrides))
	for k, v := range DefaultPrices {
		m[k] = v
	}
	for k, v := range overrides {
		m[strings.ToLower(k)] = v
	}
	return &PriceTable{prices: m}
}

// versionSuffix is what a vendor appends to a model's alias to pin a
// snapshot: a date (claude-sonnet-4-5-20250929, gpt-4o-2024-08-06), or
// "-latest".
var versionSuffix = regexp.MustCompile(`(-\d{8}|-\d{4}-\d{2}-\d{2}|-latest|-preview(-\d{2}-\d{4})?)$`)

// Lookup returns the price of provider/model: an exact entry, else the
// entry of the model without a snapshot suffix. ok is false for an
// unpriced model.
func (t *PriceTable) Lookup(provider, model string) (Price, bool) {
	if t == nil {
		return Price{}, false
	}
	key := strings.ToLower(provider + "/" + model)
	if p, ok := t.prices[key]; ok {
		return p, true
	}
	if base := versionSuffix.ReplaceAllString(key, ""); base != key {
		p, ok := t.prices[base]
		return p, ok
	}
	return Price{}, false
}

// Price returns the cost of a record's tokens, Unpriced when its model has
// no price.
func (t *PriceTable) Price(r Record) Cost {
	p, ok := t.Lookup(r.Provider, r.Model)
	if !ok {
		return Unpriced
	}
	return p.Cost(r.Tokens, r.AudioSeconds)
}
