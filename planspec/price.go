package planspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// Price is what a model's tokens cost, in USD per million: for an agent whose
// CLI names its tokens but not their cost (codex, gemini), a plan's prices
// give its tries a cost. Cache is the price of cached tokens; 0: Input's.
type Price struct {
	Input  float64 `json:"input"`
	Output float64 `json:"output"`
	Cache  float64 `json:"cache,omitempty"`
}

// Cost is what usage u costs at p.
func (p Price) Cost(u Usage) float64 {
	cache := p.Cache
	if cache == 0 {
		cache = p.Input
	}
	return Round6((float64(u.InputTokens)*p.Input + float64(u.OutputTokens)*p.Output + float64(u.CacheTokens)*cache) / 1e6)
}

// Priced is u with its cost from prices, by its model, else by its agent's
// name, when its agent named none; u as it is otherwise.
func Priced(prices map[string]Price, u *Usage, agent string) *Usage {
	if u == nil || u.CostUSD != nil || len(prices) == 0 {
		return u
	}
	p, ok := prices[u.Model]
	if !ok || u.Model == "" {
		if p, ok = prices[agent]; !ok {
			return u
		}
	}
	c := p.Cost(*u)
	priced := *u
	priced.CostUSD = &c
	return &priced
}

// ParsePrices reads a plan's prices: name (a model, or a preset) → {input,
// output, cache}, USD per million tokens, none negative.
func ParsePrices(raw json.RawMessage) (map[string]Price, error) {
	var out map[string]Price
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("want a model or preset → {input, output, cache} in USD per million tokens, like {codex: {input: 1.25, output: 10}}: %w", err)
	}
	for name, p := range out {
		for _, v := range []float64{p.Input, p.Output, p.Cache} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("%s: a price must be a number ≥ 0 (USD per million tokens)", name)
			}
		}
	}
	return out, nil
}
