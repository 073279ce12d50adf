package daemon

import (
	"fmt"
	"path/filepath"

	nanobot "github.com/nanobot-go/nanobot"
	"github.com/nanobot-go/nanobot/internal/web"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// InstallWorkspace creates the workspace at dir from the template, never
// overwriting a file, as Build does when onboard was skipped. It returns
// the files it created.
func InstallWorkspace(dir string) ([]string, error) {
	created, err := workspace.Install(nanobot.WorkspaceTemplate(), dir)
	if err != nil {
		return nil, fmt.Errorf("prepare workspace %s: %w", dir, err)
	}
	return created, nil
}

// WebTokenPath is the web login token file in the data dir, which holds the
// token when channels.web.token is empty.
func WebTokenPath(dataDir string) string { return filepath.Join(dataDir, WebTokenFile) }

// EnsureWebToken creates the web login token file of dataDir (mode 0600)
// unless it exists, as the gateway does at its first start; made says
// whether it did.
func EnsureWebToken(dataDir string) (made bool, err error) {
	return web.EnsureTokenFile(WebTokenPath(dataDir))
}

// WebToken reads the web login token file of dataDir.
func WebToken(dataDir string) (string, error) {
	return web.ReadTokenFile(WebTokenPath(dataDir))
}

// RotateWebToken writes a new random web login token to dataDir's file and
// returns it. The running gateway reads the file at every login, so the old
// token stops working at once.
func RotateWebToken(dataDir string) (string, error) {
	t, err := web.NewToken()
	if err != nil {
		return "", err
	}
	if err := web.WriteTokenFile(WebTokenPath(dataDir), t); err != nil {
		return "", err
	}
	return t, nil
}
