package discordfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

// Interaction callback route and the response types the fake knows.
const (
	RouteInteractionCallback = "POST /api/{version}/interactions/{interaction_id}/{token}/callback"

	ResponseChannelMessage         = 4
	ResponseDeferredChannelMessage = 5
	FlagEphemeral                  = 1 << 6

	interactionApplicationCommand = 2
	codeUnknownInteraction        = 10062
	codeAlreadyAcknowledged       = 40060
)

// Interaction is a slash command a user ran, and how the bot answered it.
type Interaction struct {
	ID, Token, ChannelID, UserID string
	Name                         string
	// Responses are the callback bodies received, in order (Discord accepts
	// exactly one).
	Responses []InteractionResponse
}

// InteractionResponse is one callback body.
type InteractionResponse struct {
	Type int `json:"type"`
	Data *struct {
		Content         string           `json:"content"`
		Flags           int              `json:"flags"`
		AllowedMentions *AllowedMentions `json:"allowed_mentions"`
	} `json:"data"`
}

// SlashOption is a string option of a slash command.
type SlashOption struct{ Name, Value string }

// SendSlashCommand dispatches INTERACTION_CREATE for a chat-input command
// run by u in a channel, and returns the interaction id. Discord sends
// interactions whatever the intents; the bot must answer within three
// seconds through the callback route.
func (s *Server) SendSlashCommand(channelID string, u User, roles []string, name string, opts ...SlashOption) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[channelID]
	if !ok {
		s.t.Fatalf("discordfake: SendSlashCommand: unknown channel %s", channelID)
	}
	s.users[u.ID] = u
	in := &Interaction{ID: s.newID(), Token: "itoken-" + s.newID(), ChannelID: channelID, UserID: u.ID, Name: name}
	s.interactions = append(s.interactions, in)
	options := make([]map[string]any, 0, len(opts))
	for _, o := range opts {
		options = append(options, map[string]any{"name": o.Name, "type": 3, "value": o.Value})
	}
	d := map[string]any{
		"id": in.ID, "application_id": s.appID, "type": interactionApplicationCommand, "token": in.Token,
		"version": 1, "channel_id": channelID, "locale": "en-US",
		"data": map[string]any{"id": s.newID(), "name": name, "type": 1, "options": options},
	}
	if ch.GuildID != "" {
		r := slices.Clone(roles)
		if r == nil {
			r = []string{}
		}
		d["guild_id"] = ch.GuildID
		d["member"] = Member{User: &u, Roles: r, JoinedAt: timestamp(time.Now())}
	} else {
		d["user"] = u
	}
	s.dispatch("INTERACTION_CREATE", func(int) any { return d }, 0)
	s.notify()
	return in.ID
}

// Interactions returns the slash commands run so far with their responses.
func (s *Server) Interactions() []Interaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Interaction, 0, len(s.interactions))
	for _, in := range s.interactions {
		c := *in
		c.Responses = slices.Clone(in.Responses)
		out = append(out, c)
	}
	return out
}

// WaitInteractionResponse waits until the interaction has been answered.
func (s *Server) WaitInteractionResponse(t testing.TB, id string) InteractionResponse {
	t.Helper()
	var got InteractionResponse
	s.WaitFor(t, fmt.Sprintf("a response to interaction %s", id), func() bool {
		for _, in := range s.Interactions() {
			if in.ID == id && len(in.Responses) > 0 {
				got = in.Responses[0]
				return true
			}
		}
		return false
	})
	return got
}

func (s *Server) interactionCallback(w http.ResponseWriter, r *http.Request, body []byte) {
	var resp InteractionResponse
	if err := json.Unmarshal(body, &resp); err != nil || resp.Type == 0 {
		writeJSON(w, 400, apiError{Message: "Invalid Form Body", Code: codeInvalidFormBody})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var in *Interaction
	for _, x := range s.interactions {
		if x.ID == r.PathValue("interaction_id") && x.Token == r.PathValue("token") {
			in = x
		}
	}
	switch {
	case in == nil:
		writeJSON(w, 404, apiError{Message: "Unknown interaction", Code: codeUnknownInteraction})
		return
	case len(in.Responses) > 0:
		writeJSON(w, 400, apiError{Message: "Interaction has already been acknowledged.", Code: codeAlreadyAcknowledged})
		return
	}
	in.Responses = append(in.Responses, resp)
	s.notify()
	w.WriteHeader(http.StatusNoContent)
}
