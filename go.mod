module github.com/nanobot-go/nanobot

go 1.26

require (
	go.uber.org/zap v1.28.0
	go.yaml.in/yaml/v3 v3.0.4
)

require (
	github.com/kr/pretty v0.3.1 // indirect
	github.com/rogpeppe/go-internal v1.13.1 // indirect
	github.com/stretchr/testify v1.11.1 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	gopkg.in/check.v1 v1.0.0-20201130134442-10cb98267c6c // indirect
)
