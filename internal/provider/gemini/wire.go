package gemini

import "encoding/json"

// The Gemini API's JSON, as far as the adapter uses it (v1beta,
// generateContent / streamGenerateContent and models.list). Field names are
// the API's camelCase; bytes fields (inlineData.data) are base64 strings,
// which encoding/json makes of []byte.

type wireRequest struct {
	Contents          []wireContent     `json:"contents"`
	SystemInstruction *wireContent      `json:"systemInstruction,omitempty"`
	Tools             []wireTool        `json:"tools,omitempty"`
	ToolConfig        *wireToolConfig   `json:"toolConfig,omitempty"`
	GenerationConfig  *wireGenerationCf `json:"generationConfig,omitempty"`
}

// wireContent is one turn: role "user" or "model" (no role for the system
// instruction).
type wireContent struct {
	Role  string     `json:"role,omitempty"`
	Parts []wirePart `json:"parts"`
}

// wirePart holds exactly one of its data fields. Text is a pointer because
// an empty text is meaningful: Gemini streams a thought signature on a part
// whose text is "", and such a part is replayed as it came.
type wirePart struct {
	Text             *string               `json:"text,omitempty"`
	Thought          bool                  `json:"thought,omitempty"`
	ThoughtSignature string                `json:"thoughtSignature,omitempty"`
	InlineData       *wireBlob             `json:"inlineData,omitempty"`
	FunctionCall     *wireFunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *wireFunctionResponse `json:"functionResponse,omitempty"`
}

type wireBlob struct {
	MIMEType string `json:"mimeType"`
	Data     []byte `json:"data"`
}

type wireFunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type wireFunctionResponse struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type wireTool struct {
	FunctionDeclarations []wireFunctionDecl `json:"functionDeclarations,omitempty"`
}

// wireFunctionDecl sends the tool's JSON Schema as parametersJsonSchema,
// which takes standard JSON Schema; the older `parameters` field takes an
// OpenAPI subset and refuses keywords such as additionalProperties.
type wireFunctionDecl struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type wireToolConfig struct {
	FunctionCallingConfig wireFunctionCallingConfig `json:"functionCallingConfig"`
}

type wireFunctionCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type wireGenerationCf struct {
	MaxOutputTokens int                 `json:"maxOutputTokens,omitempty"`
	Temperature     *float64            `json:"temperature,omitempty"`
	ThinkingConfig  *wireThinkingConfig `json:"thinkingConfig,omitempty"`
}

type wireThinkingConfig struct {
	IncludeThoughts bool   `json:"includeThoughts,omitempty"`
	ThinkingBudget  *int   `json:"thinkingBudget,omitempty"`
	ThinkingLevel   string `json:"thinkingLevel,omitempty"`
}

// wireResponse is one GenerateContentResponse: a whole answer, or one
// chunk of a stream. An error inside a stream arrives as {"error": {...}}.
type wireResponse struct {
	Candidates     []wireCandidate     `json:"candidates"`
	UsageMetadata  *wireUsage          `json:"usageMetadata"`
	PromptFeedback *wirePromptFeedback `json:"promptFeedback"`
	ModelVersion   string              `json:"modelVersion"`
	Error          *wireError          `json:"error"`
}

type wireCandidate struct {
	Content      *wireContent `json:"content"`
	FinishReason string       `json:"finishReason"`
	Index        int          `json:"index"`
}

type wirePromptFeedback struct {
	BlockReason string `json:"blockReason"`
}

// wireUsage counts tokens. Every chunk repeats the running totals, so the
// last one counts. promptTokenCount includes cachedContentTokenCount;
// candidatesTokenCount excludes thoughtsTokenCount.
type wireUsage struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount"`
	ToolUsePromptTokenCount int `json:"toolUsePromptTokenCount"`
}

// wireError is Google's error object (google.rpc.Status as JSON).
type wireError struct {
	Code    int               `json:"code"`
	Message string            `json:"message"`
	Status  string            `json:"status"`
	Details []json.RawMessage `json:"details"`
}

type wireModelList struct {
	Models []struct {
		Name string `json:"name"`
	} `json:"models"`
}
