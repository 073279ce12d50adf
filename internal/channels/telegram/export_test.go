package telegram

// MessageFieldUses is messageFields for the external tests: each field of
// models.Message and what the channel does with it.
func MessageFieldUses() map[string]string {
	names := [...]string{useRouting: "routing", useText: "text", useContent: "content", useContext: "context",
		useService: "service", useIgnored: "ignored"}
	out := map[string]string{}
	for name, f := range messageFields {
		if f.why == "" {
			continue // no reason given: the test reports the field as unaccounted
		}
		out[name] = names[f.use]
	}
	return out
}
