package observation

// ToolCall is one tool call of an answer: the function's name and its
// arguments' text, as the model generated them.
type ToolCall struct {
	Name, Arguments string
}
