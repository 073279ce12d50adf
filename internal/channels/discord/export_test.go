package discord

// MessageFieldUses is messageFields for the external tests: each field of
// discordgo.Message and what the channel does with it; a row without a
// reason is left out, so the test reports the field.
func MessageFieldUses() map[string]string {
	out := map[string]string{}
	for name, f := range messageFields {
		if f[1] != "" {
			out[name] = f[0]
		}
	}
	return out
}
