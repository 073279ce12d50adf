// Package fakes is the one place where fake platform servers live. Each
// subpackage speaks a real wire protocol over real HTTP or WebSocket (httptest,
// gorilla/websocket) so adapters are tested exactly as they run:
//
//	fakellm      the scripted model shared by the LLM fakes
//	openaifake   OpenAI Chat Completions (SSE) and /audio/transcriptions
//	anthropicfake Anthropic Messages (SSE)
//	geminifake   Gemini generateContent (SSE) and models.list
//	telegramfake Telegram Bot API
//	Outage       a TCP proxy that drops a link and restores it (a network blip)
//	discordfake  Discord REST and gateway
//
// Test code only: nothing imports them but _test files, other fakes and
// bench/cmd/nanobot-bench, which runs them as standalone servers (fakes.TB and
// Standalone let a program that is not a test do so).
package fakes
