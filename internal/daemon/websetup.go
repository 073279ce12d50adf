package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/atomicfile"
	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/kinds"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/web"
)

// SetupInput is a key or token to test or save (the web page's setup view,
// `nanobot onboard` in a terminal).
type SetupInput = web.SetupInput

// SecretsPath is the secrets overlay of dataDir (config.SecretsFile).
func SecretsPath(dataDir string) string { return filepath.Join(dataDir, config.SecretsFile) }

// overlayMu serialises the read-modify-write of a secrets overlay within
// the process (the page's saves; onboard is another process, run by hand).
var overlayMu sync.Mutex

// SaveSecrets sets keys of the secrets overlay of dataDir (mode 0600,
// replaced whole so that a crash leaves the old file or the new one).
func SaveSecrets(dataDir string, set map[string]string) (string, error) {
	overlayMu.Lock()
	defer overlayMu.Unlock()
	path := SecretsPath(dataDir)
	cur, err := config.ReadOverlay(path)
	if err != nil {
		return "", err
	}
	for k, v := range set {
		cur[k] = v
	}
	data, err := config.WriteOverlayData(cur)
	if err != nil {
		return "", err
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}

// TestSetup checks what in holds with one cheap call, with the adapters the
// gateway runs: the provider's model list for a key, Telegram getMe or
// Discord users/@me for a bot token. It says what it found, or why not.
func TestSetup(ctx context.Context, cfg *config.Config, dataDir string, in SetupInput) (string, error) {
	var found []string
	if in.Provider != "" {
		f, err := testKey(ctx, cfg, in.Provider, in.Key)
		if err != nil {
			return "", err
		}
		found = append(found, f)
	}
	if in.Channel != "" {
		f, err := testToken(ctx, cfg, dataDir, in.Channel, in.Token)
		if err != nil {
			return "", err
		}
		found = append(found, f)
	}
	if len(found) == 0 {
		return "", errors.New("nothing to test: choose a provider and paste its key, or paste a bot token")
	}
	return strings.Join(found, "; "), nil
}

func testKey(ctx context.Context, cfg *config.Config, name, key string) (string, error) {
	pc, ok := cfg.Providers[name]
	if !ok {
		return "", fmt.Errorf("providers.%s is not configured", name)
	}
	key = strings.TrimSpace(key)
	if key == "" {
		return "", fmt.Errorf("paste the API key for %s", name)
	}
	pc.APIKey = key
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	p, err := newProvider(name, pc, hc, zap.NewNop())
	if err != nil {
		return "", err
	}
	cctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	ids, err := p.Models(cctx)
	if problem := probeProblem(name, "", err); problem != "" {
		if strings.HasPrefix(problem, "the API key was refused") {
			problem = name + " refused this key: check that you copied it whole"
		}
		return "", errors.New(problem)
	}
	if err != nil {
		return fmt.Sprintf("%s answered; it has no model list to prove the key, the first message will", name), nil
	}
	return fmt.Sprintf("%s accepted the key (%d models listed)", name, len(ids)), nil
}

func testToken(ctx context.Context, cfg *config.Config, dataDir, channel, token string) (string, error) {
	token = strings.TrimSpace(token)
	k, ok := kinds.ByName(channel)
	if !ok {
		return "", fmt.Errorf("channel %q takes no token here (%s)", channel, strings.Join(ChannelNames(), " or "))
	}
	if k.TokenShape != nil {
		if err := k.TokenShape(token); err != nil {
			return "", err
		}
	}
	// Only the "who am I" runs, on a copy with the token and policy open.
	c, ok := cfg.WithChannelToken(channel, token)
	if !ok {
		return "", fmt.Errorf("channel %q takes no token here", channel)
	}
	parts := channelParts{pub: bus.New(1), pairing: channels.NewPairingStore(filepath.Join(dataDir, PairingFile)), dataDir: dataDir}
	build := func() (channels.Adapter, error) { return newAdapter(c, k, parts, zap.NewNop()) }
	ch, err := build()
	if err != nil {
		return "", err
	}
	cctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	who, err := ch.Check(cctx)
	switch {
	case errors.Is(err, channels.ErrTokenRefused):
		return "", fmt.Errorf("%s refused this token: check that you copied it whole", channel)
	case err != nil:
		return "", fmt.Errorf("cannot reach %s: %v", channel, err)
	}
	return fmt.Sprintf("%s accepted the token: %s", channel, who), nil
}

// secretKeys are the overlay keys in names.
func secretKeys(in SetupInput) map[string]string {
	set := map[string]string{}
	if in.Provider != "" {
		set["providers."+in.Provider+".api_key"] = strings.TrimSpace(in.Key)
	}
	if in.Channel != "" {
		set[ChannelTokenKey(in.Channel)] = strings.TrimSpace(in.Token)
	}
	return set
}

// webSetup is the gateway's side of the page's setup view: it tests with
// TestSetup, saves to the secrets overlay and puts a new model key in
// place at once (the provider's slot), and a bot token too (the channel's
// supervisor restarts it with the token); a token for a channel that is
// not enabled, or in Telegram's webhook mode, takes effect at the next
// start.
type webSetup struct {
	g *Gateway
}

var _ web.Setup = webSetup{}

func (s webSetup) State() web.SetupState {
	g := s.g
	st := web.SetupState{Needed: g.core.Providers.NeedsKey()}
	used := map[string]bool{}
	for _, name := range g.cfg.UsedProviders() {
		used[name] = true
	}
	for _, name := range sortedKeys(g.core.Providers.slots) {
		slot := g.core.Providers.slots[name]
		p := web.SetupProvider{Name: name, Kind: g.cfg.Providers[name].Kind, InUse: used[name], KeyVar: g.cfg.KeyVar(name)}
		if err := slot.Problem(); err != nil {
			p.Problem = g.secrets.Redact(err.Error())
		}
		st.Providers = append(st.Providers, p)
	}
	for _, name := range ChannelNames() {
		c := web.SetupChannel{Name: name}
		for _, run := range g.channels {
			if run.name == name {
				c.Enabled = true
				if err := run.Healthy(); err != nil {
					c.Problem = g.secrets.Redact(err.Error())
				}
			}
		}
		st.Channels = append(st.Channels, c)
	}
	return st
}

func (s webSetup) Test(ctx context.Context, in SetupInput) (string, error) {
	return TestSetup(ctx, s.g.cfg, s.g.opts.DataDir, in)
}

func (s webSetup) Save(ctx context.Context, in SetupInput) (web.SaveResult, error) {
	g := s.g
	if _, err := TestSetup(ctx, g.cfg, g.opts.DataDir, in); err != nil {
		return web.SaveResult{}, err
	}
	var res web.SaveResult
	if in.Provider != "" {
		if err := g.core.Providers.SetKey(ctx, in.Provider, strings.TrimSpace(in.Key)); err != nil {
			return web.SaveResult{}, err
		}
		res.Applied = append(res.Applied, "providers."+in.Provider+".api_key")
	}
	// Saved before the channel uses it, so the new token is redacted (the
	// secrets file is among the redacted files) from its first log line.
	path, err := SaveSecrets(g.opts.DataDir, secretKeys(in))
	if err != nil {
		return web.SaveResult{}, err
	}
	res.File = path
	if in.Channel != "" {
		key := ChannelTokenKey(in.Channel)
		if err := g.applyToken(in.Channel, strings.TrimSpace(in.Token)); err != nil {
			g.log.Info("bot token saved for the next start", zap.String("channel", in.Channel), zap.String("reason", err.Error()))
			res.Restart = append(res.Restart, key)
		} else {
			res.Applied = append(res.Applied, key)
		}
	}
	return res, nil
}

// ChannelNames are the chat channels of the channel table, in its order.
func ChannelNames() []string {
	names := make([]string, len(kinds.All))
	for i, k := range kinds.All {
		names[i] = k.Name
	}
	return names
}

// ChannelTokenKey is the key of channel's credential
// (channels.<name>.token), the one the secrets overlay sets.
func ChannelTokenKey(channel string) string {
	if k, ok := kinds.ByName(channel); ok && k.Section.TokenKey != "" {
		return "channels." + channel + "." + k.Section.TokenKey
	}
	return "channels." + channel + ".token"
}

// applyToken gives the running channel name a new token: its supervisor
// builds the adapter anew from the config with it and restarts it. A
// channel that is not enabled, or cannot take a token while it runs, takes
// it at the next start (the error says why).
func (g *Gateway) applyToken(name, token string) error {
	i := slices.IndexFunc(g.channels, func(c *channelRun) bool { return c.name == name })
	if i < 0 {
		return fmt.Errorf("channels.%s is not enabled", name)
	}
	c, ok := g.cfg.WithChannelCredential(name, token)
	if !ok {
		return fmt.Errorf("channel %q takes no token here", name)
	}
	return g.channels[i].SetToken(c)
}
