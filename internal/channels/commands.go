package channels

// Command is a chat command the agent understands (README.md#commands), for
// platforms that advertise commands (Telegram's setMyCommands, Discord's slash
// commands).
type Command struct {
	Name        string
	Description string
}

// Commands lists the chat commands, in the order platforms should show them.
func Commands() []Command {
	return []Command{
		{Name: "new", Description: "Start a new conversation"},
		{Name: "stop", Description: "Stop the current answer"},
		{Name: "help", Description: "Show what the bot can do"},
		{Name: "status", Description: "Model, token use and session size"},
		{Name: "model", Description: "Show or switch the model"},
		{Name: "whoami", Description: "Show your user id (for allowlists)"},
	}
}
