package config_test

import (
	"github.com/nanobot-go/nanobot/internal/channels/kinds"
	"github.com/nanobot-go/nanobot/internal/config"
)

// The channel table's sections, for every test of this package: config
// may not import the adapters, its tests see them through this file.
func init() { *config.TestSections = kinds.Sections() }
