package mcp

import (
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestConvertResult(t *testing.T) {
	size := int64(12)
	tests := []struct {
		name    string
		res     *sdk.CallToolResult
		want    string
		images  int
		isError bool
	}{
		{"texts joined", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a"}, &sdk.TextContent{Text: "b"}}}, "a\nb", 0, false},
		{"nothing", &sdk.CallToolResult{}, "", 0, false},
		{"isError kept", &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no"}}}, "no", 0, true},
		{"image passed on", &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{MIMEType: "IMAGE/PNG", Data: pngPixel}}}, "", 1, false},
		{"image type models cannot read", &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{MIMEType: "image/tiff", Data: []byte{1}}}},
			`[image of type "image/tiff" omitted: the model cannot read it]`, 0, false},
		{"image too big", &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{MIMEType: "image/png", Data: make([]byte, maxImageBytes+1)}}},
			"[image omitted: 5242881 bytes is over the 5242880-byte limit]", 0, false},
		{"audio described", &sdk.CallToolResult{Content: []sdk.Content{&sdk.AudioContent{MIMEType: "audio/wav", Data: []byte{1, 2}}}},
			"[audio omitted (audio/wav, 2 bytes): the model cannot hear it]", 0, false},
		{"resource link", &sdk.CallToolResult{Content: []sdk.Content{&sdk.ResourceLink{Name: "report", URI: "file:///r.pdf", Size: &size}}},
			"[resource link: report file:///r.pdf]", 0, false},
		{"embedded text resource", &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://a", Text: "body"}}}},
			"[resource mem://a]\nbody", 0, false},
		{"embedded binary resource", &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://b", MIMEType: "application/zip", Blob: []byte{1, 2, 3}}}}},
			"[binary resource mem://b omitted (application/zip, 3 bytes)]", 0, false},
		{"structured only", &sdk.CallToolResult{StructuredContent: map[string]any{"n": 1}}, `{"n":1}`, 0, false},
		{"structured already in the text", &sdk.CallToolResult{StructuredContent: map[string]any{"n": 1},
			Content: []sdk.Content{&sdk.TextContent{Text: "{\n  \"n\": 1\n}"}}}, "{\n  \"n\": 1\n}", 0, false},
		{"structured besides other text", &sdk.CallToolResult{StructuredContent: []any{"x"},
			Content: []sdk.Content{&sdk.TextContent{Text: "one item"}}}, "one item\n[\"x\"]", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := convertResult(tc.res)
			if got.Text != tc.want || len(got.Images) != tc.images || got.IsError != tc.isError {
				t.Errorf("got text %q, %d images, isError %v; want %q, %d, %v", got.Text, len(got.Images), got.IsError, tc.want, tc.images, tc.isError)
			}
			for _, img := range got.Images {
				if img.MIME != "image/png" {
					t.Errorf("image MIME %q, want image/png", img.MIME)
				}
			}
		})
	}
}
