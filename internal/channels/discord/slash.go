package discord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/commands"
)

// interactionDeadline is how long the intake may take before the
// interaction is answered; Discord gives up on an answer after 3 s.
const interactionDeadline = 2 * time.Second

// slashCommands are the menu's chat commands (internal/commands) as Discord
// application commands, so they show up in Discord's command picker. Running
// one is the same as typing it.
func slashCommands() []*discordgo.ApplicationCommand {
	var out []*discordgo.ApplicationCommand
	for _, cmd := range commands.Menu() {
		ac := &discordgo.ApplicationCommand{Type: discordgo.ChatApplicationCommand, Name: cmd.Name, Description: cmd.Description}
		if cmd.Arg != nil {
			ac.Options = []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionString,
				Name: cmd.Arg.Name, Description: cmd.Arg.Description}}
		}
		out = append(out, ac)
	}
	return out
}

// registerCommands overwrites the bot's global application commands with the
// chat commands. It is idempotent; Discord applies it within a minute.
func (c *Channel) registerCommands(ctx context.Context, appID string) error {
	if appID == "" {
		return errors.New("no application id in READY")
	}
	_, err := c.sess.ApplicationCommandBulkOverwrite(appID, "", slashCommands(), discordgo.WithContext(ctx))
	if err != nil {
		return classify("register slash commands", err)
	}
	return nil
}

// onInteractionCreate runs on the gateway reader: it queues a slash command
// on its chat's lane, like a message.
func (c *Channel) onInteractionCreate(_ *discordgo.Session, e *discordgo.InteractionCreate) {
	if e.Interaction == nil || e.Type != discordgo.InteractionApplicationCommand {
		return
	}
	ctxp, lanes := c.runCtx.Load(), c.lanes.Load()
	if ctxp == nil || lanes == nil {
		return
	}
	ctx, i := *ctxp, e.Interaction
	if err := lanes.Go(ctx, i.ChannelID, func() { c.handleCommand(ctx, i) }); err != nil {
		c.log.Info("slash command not handled: shutting down", zap.String("interaction", i.ID))
	}
}

// handleCommand passes a slash command through the same gate as a typed
// command ("/model gpt-4o"), then answers the interaction, as Discord
// requires, with a short note only the user sees; the agent's answer comes
// as an ordinary message.
func (c *Channel) handleCommand(ctx context.Context, i *discordgo.Interaction) {
	user, member := i.User, i.Member
	if member != nil && member.User != nil {
		user = member.User
	}
	if user == nil || user.Bot {
		c.respond(ctx, i, "Ignored.")
		return
	}
	data := i.ApplicationCommandData()
	text := "/" + data.Name
	for _, o := range data.Options {
		if o.Type == discordgo.ApplicationCommandOptionString {
			text += " " + strings.TrimSpace(o.StringValue())
		}
	}
	text = strings.TrimSpace(text)
	a := channels.Arrival{
		Msg: bus.InboundMessage{
			Channel: Name, SenderID: user.ID, SenderName: displayName(user, member), ChatID: i.ChannelID,
			Content: text, Time: c.deps.Clock.Now(), Metadata: map[string]string{"is_group": "false"},
		},
		Username:  user.Username,
		Addressed: true, // a slash command is always meant for its bot
	}
	if i.GuildID != "" && !c.guildGate(ctx, i.GuildID, i.ChannelID, user.ID, member, &a) {
		c.respond(ctx, i, "This bot does not answer here.")
		return
	}
	actx, cancel := context.WithTimeout(ctx, interactionDeadline)
	v, err := c.intake.Admit(actx, a)
	cancel()
	if err != nil {
		c.log.Warn("slash command not delivered to the agent", zap.String("command", data.Name), zap.Error(err))
		c.respond(ctx, i, "I am too busy right now; please try again in a moment.")
		return
	}
	c.respond(ctx, i, verdictNote(v, text))
}

// verdictNote is the private acknowledgement of a slash command.
func verdictNote(v channels.Verdict, text string) string {
	switch v {
	case channels.Published:
		return fmt.Sprintf("`%s` received.", text)
	case channels.WhoAmI, channels.PairingCode:
		return "Answered in this chat."
	case channels.RateLimited:
		return "You are sending commands faster than I can read them; please wait a minute."
	}
	// Denied and the rest: say nothing about why.
	return "This bot is not available to you here."
}

func (c *Channel) respond(ctx context.Context, i *discordgo.Interaction, text string) {
	err := c.sess.InteractionRespond(i, &discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: text, Flags: discordgo.MessageFlagsEphemeral,
			AllowedMentions: allowedMentions()},
	}, discordgo.WithContext(ctx))
	if err != nil {
		c.log.Warn("slash command not acknowledged", zap.String("interaction", i.ID), zap.Error(err))
	}
}
