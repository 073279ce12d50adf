package matrix

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"go.uber.org/zap"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/nanobot-go/nanobot/internal/atomicfile"
	"github.com/nanobot-go/nanobot/internal/channels"
)

// login is LoginFile's document: the token a password login got, kept so
// that each start does not make a new device.
type login struct {
	Homeserver  string `json:"homeserver"`
	UserID      string `json:"user_id"`
	DeviceID    string `json:"device_id"`
	AccessToken string `json:"access_token"`
}

// authenticate makes the client's token good: the configured
// access_token, else the one a password login kept, else a new login. It
// checks the token with /whoami, logging in again once when a kept token
// was refused.
func (c *Channel) authenticate(ctx context.Context) error {
	if c.cfg.AccessToken != "" {
		return c.whoami(ctx)
	}
	if l, ok := c.savedLogin(); ok {
		c.cli.AccessToken, c.cli.DeviceID = l.AccessToken, id.DeviceID(l.DeviceID)
		err := c.whoami(ctx)
		if err == nil || !errors.Is(err, channels.ErrTokenRefused) {
			return err
		}
		c.log.Info("kept matrix token refused; logging in again")
	}
	resp, err := c.cli.Login(ctx, &mautrix.ReqLogin{
		Type:                     mautrix.AuthTypePassword,
		Identifier:               mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: c.cfg.UserID},
		Password:                 c.cfg.Password,
		DeviceID:                 id.DeviceID(c.cfg.DeviceID),
		InitialDeviceDisplayName: "nanobot",
	})
	if err != nil {
		err = classify("login", err)
		var pe *channels.PermanentError
		if errors.As(err, &pe) {
			// A wrong password (403) will not fix itself.
			return fatal{fmt.Errorf("%w: check channels.matrix.password", err)}
		}
		return err
	}
	c.cli.AccessToken, c.cli.DeviceID = resp.AccessToken, resp.DeviceID
	c.saveLogin(login{Homeserver: c.cfg.Homeserver, UserID: c.cfg.UserID, DeviceID: resp.DeviceID.String(), AccessToken: resp.AccessToken})
	return c.whoami(ctx)
}

// whoami checks the token and that it is the configured user's.
func (c *Channel) whoami(ctx context.Context) error {
	resp, err := c.cli.Whoami(ctx)
	if err != nil {
		return classify("whoami", err)
	}
	if resp.UserID != c.bot {
		return fatal{fmt.Errorf("matrix: the token is %s's, not channels.matrix.user_id %s", resp.UserID, c.bot)}
	}
	if resp.DeviceID != "" {
		c.cli.DeviceID = resp.DeviceID
	}
	return nil
}

func (c *Channel) loginPath() string {
	if c.deps.DataDir == "" {
		return ""
	}
	return filepath.Join(c.deps.DataDir, LoginFile)
}

func (c *Channel) savedLogin() (login, bool) {
	p := c.loginPath()
	if p == "" {
		return login{}, false
	}
	var l login
	found, err := channels.ReadStateFile(p, &l)
	if err != nil {
		c.log.Warn("matrix login file not read; logging in again", zap.Error(err))
		return login{}, false
	}
	if !found || l.AccessToken == "" || l.Homeserver != c.cfg.Homeserver || l.UserID != c.cfg.UserID {
		return login{}, false
	}
	return l, true
}

// saveLogin keeps the token (0600); without a data dir each start logs in
// anew and leaves a device behind.
func (c *Channel) saveLogin(l login) {
	p := c.loginPath()
	if p == "" {
		c.log.Warn("no data dir: the matrix login is not kept, and every start makes a new device")
		return
	}
	data, err := jsonMarshal(l)
	if err == nil {
		err = atomicfile.Write(p, data, 0o600)
	}
	if err != nil {
		c.log.Error("matrix login not kept; the next start logs in again", zap.Error(err))
	}
}
