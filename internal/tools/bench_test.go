package tools

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
)

// BenchmarkExecute measures the registry's own cost per call: lookup,
// casts, schema validation, the goroutine and timeout, and the output cap,
// around a tool that does nothing.
func BenchmarkExecute(b *testing.B) {
	r := NewRegistry(RegistryLimits(config.Defaults().Agents), zap.NewNop())
	if err := r.Register(&fakeTool{name: "echo", params: echoParams}); err != nil {
		b.Fatal(err)
	}
	c := call("echo", `{"path":"notes/a.md","offset":"5","ids":[1,2,3],"flag":"true"}`)
	b.ReportAllocs()
	for b.Loop() {
		if res := r.Execute(context.Background(), c, Origin{}); res.IsError {
			b.Fatal(res.Content.Live)
		}
	}
}

// BenchmarkClosestRegion measures edit_file's miss path on a 10,000-line
// file with a 5-line old_text.
func BenchmarkClosestRegion(b *testing.B) {
	var sb strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&sb, "line %d: some ordinary source text, value = %d\n", i, i*31)
	}
	content := sb.String()
	old := "line 7000: some ordinary source text, value = 217000\nline 7001: some ordinary sourse text, value = 217031\n" +
		"line 7002: some ordinary source text, value = 217062\nline 7003: some ordinary source text\nline 7004: x"
	b.SetBytes(int64(len(content)))
	for b.Loop() {
		if m := closestRegion(content, old); m.first != 7001 {
			b.Fatalf("found lines %d-%d", m.first, m.last)
		}
	}
}

// BenchmarkSpecs is a turn asking for the tool specs of an unchanged
// registry of 16 tools.
func BenchmarkSpecs(b *testing.B) {
	r := NewRegistry(RegistryLimits(config.Defaults().Agents), zap.NewNop())
	for i := range 16 {
		if err := r.Register(&fakeTool{name: fmt.Sprintf("tool_%02d", i), params: echoParams}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if len(r.Specs()) != 16 {
			b.Fatal("wrong specs")
		}
	}
}
