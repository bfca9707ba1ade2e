package client

import "encoding/json"

// Attachments are what a request carries beside its prompt: tools, a
// response format, images. A workload builds them once (probe/plan) and
// every request shares them, read only; each flavor puts them where its
// API has a field for them (the configuration refuses a kind on a flavor
// that has none).
type Attachments struct {
	// Tools is the JSON array sent as "tools", in the OpenAI API's shape
	// ([{"type":"function","function":{...}}]), which Ollama's /api/chat
	// shares.
	Tools json.RawMessage
	// ToolChoice is the JSON of OpenAI's "tool_choice"; Ollama has none.
	ToolChoice json.RawMessage
	// ResponseFormat is the JSON of OpenAI's "response_format".
	ResponseFormat json.RawMessage
	// OllamaFormat is Ollama's "format": "json", or the schema itself.
	OllamaFormat json.RawMessage
	// ResponsesTools, ResponsesToolChoice and ResponsesText are the same
	// kinds in the OpenAI Responses API's shapes (POST /v1/responses),
	// which differ from chat's: a tool is flat,
	// [{"type":"function","name":...,"description":...,"parameters":{...}}];
	// a named tool_choice is {"type":"function","name":...}; the response
	// format is "text": {"format": {"type":"json_schema","name":...,
	// "schema":{...},"strict":true}} or {"format":{"type":"json_object"}}.
	ResponsesTools      json.RawMessage
	ResponsesToolChoice json.RawMessage
	ResponsesText       json.RawMessage
	// Images go as OpenAI content parts (data URLs), as the Responses
	// API's input_image parts, and as Ollama's base64 "images". Every
	// request's body shares their bytes (pieces.go).
	Images []Image
}

// openAIMessages is a chat body's messages: the prompt as a string, or,
// with images, as content parts, the text first (written in pieces around
// the shared images: pieces.go).
func (a *Attachments) openAIMessages(prompt string) any {
	if a == nil || len(a.Images) == 0 {
		return []map[string]string{{"role": "user", "content": prompt}}
	}
	return &withImages{shape: chatParts, prompt: prompt, images: a.Images}
}

// responsesInput is a Responses body's input: the prompt as a string, or,
// with images, one user message whose content is an input_text part then
// an input_image part (a data URL, detail "auto", which the API requires)
// per image.
func (a *Attachments) responsesInput(prompt string) any {
	if a == nil || len(a.Images) == 0 {
		return prompt
	}
	return &withImages{shape: responsesParts, prompt: prompt, images: a.Images}
}

// setResponses puts the tools and the response format into a Responses
// body (the images are in its input already).
func (a *Attachments) setResponses(body map[string]any) {
	if a == nil {
		return
	}
	if a.ResponsesTools != nil {
		body["tools"] = a.ResponsesTools
		if a.ResponsesToolChoice != nil {
			body["tool_choice"] = a.ResponsesToolChoice
		}
	}
	if a.ResponsesText != nil {
		body["text"] = a.ResponsesText
	}
}

// setOpenAI puts the attachments into an OpenAI body (the images are in
// its messages already); completions take only the response format.
func (a *Attachments) setOpenAI(body map[string]any, chat bool) {
	if a == nil {
		return
	}
	if chat && a.Tools != nil {
		body["tools"] = a.Tools
		if a.ToolChoice != nil {
			body["tool_choice"] = a.ToolChoice
		}
	}
	if a.ResponseFormat != nil {
		body["response_format"] = a.ResponseFormat
	}
}

// setOllama puts the attachments into an Ollama body: images beside the
// prompt (/api/generate) or in the message (/api/chat), tools on chat.
func (a *Attachments) setOllama(body map[string]any, chat bool, prompt string) {
	if a == nil {
		return
	}
	if chat {
		if len(a.Images) > 0 {
			body["messages"] = &withImages{shape: ollamaMessage, prompt: prompt, images: a.Images}
		}
		if a.Tools != nil {
			body["tools"] = a.Tools
		}
	} else if len(a.Images) > 0 {
		body["images"] = &withImages{shape: ollamaImages, images: a.Images}
	}
	if a.OllamaFormat != nil {
		body["format"] = a.OllamaFormat
	}
}
