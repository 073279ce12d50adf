module github.com/nanobot-go/nanobot

go 1.26.0

require (
	github.com/go-telegram/bot v1.19.0
	github.com/yuin/goldmark v1.8.7
	go.uber.org/goleak v1.3.0
	go.uber.org/zap v1.28.0
)

require (
	github.com/stretchr/testify v1.11.1 // indirect
	go.uber.org/multierr v1.10.0 // indirect
)
