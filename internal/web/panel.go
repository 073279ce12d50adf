package web

import "net/http"

// Panel serves the control panel's data.
type Panel struct{}

func (p *Panel) routes(api func(string, http.HandlerFunc)) {}
