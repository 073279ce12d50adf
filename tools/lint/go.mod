module github.com/nanobot-go/nanobot/tools/lint

go 1.26.0

require (
	codeberg.org/polyfloyd/go-errorlint v1.9.1
	github.com/kisielk/errcheck v1.30.0
	github.com/timakin/bodyclose v0.0.0-20260723120731-857993a2939c
	golang.org/x/tools v0.52.0
	honnef.co/go/tools v0.8.2
)

require (
	github.com/gostaticanalysis/analysisutil v0.7.1 // indirect
	github.com/gostaticanalysis/comment v1.4.2 // indirect
	golang.org/x/exp/typeparams v0.0.0-20231108232855-2478ac86f678 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/tools/go/packages/packagestest v0.1.1-deprecated // indirect
)
