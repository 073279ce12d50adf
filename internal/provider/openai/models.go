package openai

import (
	"context"
	"fmt"

	"github.com/nanobot-go/nanobot/internal/provider/httpcall"
)

// Models lists the model ids the endpoint offers (GET /models), for
// doctor: the cheapest call that proves the server is reachable and the key
// accepted. Failures are *llm.APIError like Stream's.
func (p *Provider) Models(ctx context.Context) ([]string, error) {
	callCtx, cancel := httpcall.Context(ctx, p.cfg.Timeout)
	defer cancel()
	d := &doer{client: p.http, extra: p.cfg.ExtraHeaders}
	list, err := p.client(d).ListModels(callCtx)
	if err != nil {
		d.closeBody()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("openai %s: list models: %w", p.name, ctx.Err())
		}
		return nil, p.callError(ctx, callCtx, d, err)
	}
	ids := make([]string, 0, len(list.Models))
	for _, m := range list.Models {
		ids = append(ids, m.ID)
	}
	return ids, nil
}
