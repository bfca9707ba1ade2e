package config

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// RequestKinds is what a workload's or a module's requests carry beside
// their prompt: tools the model may call, a response format its answer
// must follow, images. Each is checked against the answer (probe/validity):
// a tool call must name a declared function with arguments that match its
// parameters, a structured answer must parse and match its schema.
//
// Workloads and modules hold it inline, so its keys sit beside prompt:
//
//	tools:
//	  - name: get_weather
//	    description: The weather in a city.
//	    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
//	tool_choice: required
//	response_format: {type: json_schema, schema_file: answer.schema.json}
//	images: {count: 2, width: 256, height: 256, format: png}
type RequestKinds struct {
	Tools []Tool `yaml:"tools,omitempty"`
	// ToolChoice is auto (the default: the model may call a tool),
	// required (it must), or the name of one of Tools (it must call that
	// one). Only with tools.
	ToolChoice string `yaml:"tool_choice,omitempty"`
	// ResponseFormat asks for a JSON answer, of any shape (json_object) or
	// of a schema (json_schema).
	ResponseFormat *ResponseFormat `yaml:"response_format,omitempty"`
	// Images are synthetic images sent with every request.
	Images *Images `yaml:"images,omitempty"`
}

// Tool is a function the model may call.
type Tool struct {
	// Name matches ^[a-zA-Z0-9_-]{1,64}$, as the OpenAI API requires.
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Parameters is the JSON Schema of the call's arguments (an object
	// schema, inline in YAML); empty: any object.
	Parameters map[string]any `yaml:"parameters"`

	// ParametersJSON and Schema are Parameters encoded and compiled at
	// load time: once per configuration, never per request.
	ParametersJSON json.RawMessage    `yaml:"-"`
	Schema         *jsonschema.Schema `yaml:"-"`
}

// ResponseFormat asks for a structured answer.
type ResponseFormat struct {
	// Type is json_object (any JSON object) or json_schema (one that
	// matches Schema or SchemaFile).
	Type string `yaml:"type"`
	// Name is json_schema's name as the OpenAI API sends it (default
	// "answer").
	Name string `yaml:"name"`
	// Schema is the JSON Schema inline; SchemaFile a JSON file holding it
	// (relative to the configuration file). One of them with json_schema.
	Schema     map[string]any `yaml:"schema"`
	SchemaFile string         `yaml:"schema_file"`
	// Strict is json_schema's strict flag, which the OpenAI APIs' flavors
	// send (FlavorFacts.SendsStrict); unset, it is true, as it always was
	// (StrictSchema). With it true OpenAI holds the answer to the schema,
	// and answers every request whose schema breaks its strict rules with
	// a 400: so such a schema is refused at load (strictViolations), and
	// false sends any schema as it is. Ollama's format has no flag: there,
	// true is refused at load and false sends nothing.
	Strict *bool `yaml:"strict"`

	// SchemaJSON and Compiled are the schema encoded and compiled at
	// load time; nil for json_object, which only has to be an object.
	SchemaJSON json.RawMessage    `yaml:"-"`
	Compiled   *jsonschema.Schema `yaml:"-"`
}

// StrictSchema says whether json_schema's strict flag is true: Strict, or
// true when it is unset.
func (rf *ResponseFormat) StrictSchema() bool { return rf.Strict == nil || *rf.Strict }

// Images are deterministic synthetic images sent with every request of a
// workload (OpenAI chat content parts with data URLs, the Responses API's
// input_image parts; Ollama's base64 images).
type Images struct {
	Count  int `yaml:"count"`
	Width  int `yaml:"width"`
	Height int `yaml:"height"`
	// Format is png (the default) or jpeg.
	Format string `yaml:"format"`
	// Seed makes the pixels; the same seed, the same bytes.
	Seed int64 `yaml:"seed"`
}

// Values and bounds of the request kinds.
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceRequired = "required"

	ResponseJSONObject = "json_object"
	ResponseJSONSchema = "json_schema"

	ImagePNG  = "png"
	ImageJPEG = "jpeg"

	// MaxTools bounds a request's tools (and the counters' work per answer).
	MaxTools = 32
	// MaxSchemaBytes bounds a schema, encoded as JSON: a tool's parameters
	// or a response format's schema, inline or from its file.
	MaxSchemaBytes = 64 << 10
	// MaxSchemaDepth bounds the nesting of a schema's JSON document (its
	// top-level object is 1), and MaxSubschemas its objects and booleans,
	// each of which may be a subschema. The compiler's work grows with
	// the square of the subschemas and, per subschema, with its depth
	// (schemaShape says where): a 65 KB schema nested 6,500 deep had not
	// loaded after 500 s. Within both, the costliest 64 KiB schema loads
	// in some 0.1 s (docs/limits.md). 64 levels are some 30 levels of
	// nested objects (properties, then a name, per level), three times
	// the 10 that OpenAI's structured outputs accept; 1000 subschemas
	// are a schema of several hundred properties.
	MaxSchemaDepth = 64
	MaxSubschemas  = 1000
	// MaxAnswerDepth bounds the nesting of an answer, or of a tool call's
	// arguments, that is validated (probe/plan): a deeper one is judged
	// invalid_json, saying so, before it is parsed. The validator recurses
	// per level and keeps each level's path in its errors: 9,990 levels
	// (a 20 KB answer) took 840 MB against a recursive schema, 128 take
	// kilobytes. 128 levels are ten times what a schema of OpenAI's 10
	// nested objects describes; an answer deeper than any schema that is
	// not recursive describes cannot match it anyway. It sits here
	// because a schema's cost is bounded at load over answers this deep.
	MaxAnswerDepth = 128
	// MaxSchemaEvaluations bounds the subschemas the validator evaluates
	// at one value of an answer at most MaxAnswerDepth deep (schemaCost
	// says how it is counted): each level multiplies them where two of a
	// value's subschemas recurse (anyOf: [{$ref: "#"}, {$ref: "#"}]), so
	// that a schema of 40 bytes made an answer 18 deep take 9 s and
	// 1.5 GB. A check's work is then at most this many evaluations per
	// value of the answer, whose text is bounded
	// (client.DefaultMaxTextBytes). A union of 30 object types, each
	// through a $ref, is 61 at its top.
	MaxSchemaEvaluations = 100
	// MaxImages bounds the images of one request.
	MaxImages = 16
	// MaxImageSide bounds an image's width and height, in pixels.
	MaxImageSide = 4096
	// MaxImagePixelBytes bounds count × width × height × 3 (the images'
	// RGB bytes), and with it the encoded bytes a request carries: a PNG
	// holds at most its raw bytes and some framing, a JPEG far fewer.
	MaxImagePixelBytes = 16 << 20
	// MaxTotalImagePixelBytes bounds the same product added up over
	// every workload and module of a configuration. Each holds its images
	// encoded once, as long as the configuration runs, and its requests
	// share them whatever the number in flight (probe/client, pieces.go):
	// a PNG of these synthetic images is some 0.82 of its pixel bytes,
	// and its base64 4/3 of that, so 64 MiB of pixels hold some 74 MB,
	// four workloads or modules at MaxImagePixelBytes (docs/limits.md,
	// "Images").
	MaxTotalImagePixelBytes = 64 << 20
)

// toolNameRE is the OpenAI API's rule for function names; it also keeps
// '{' out of a name, which the validator relies on to split a call's name
// from its arguments.
var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Any says whether the kinds ask for anything beyond the prompt.
func (k *RequestKinds) Any() bool {
	return len(k.Tools) > 0 || k.ResponseFormat != nil || k.Images != nil
}

// compileKinds validates the request kinds of every workload and module,
// reads their schema files (relative to dir) and compiles their schemas.
func (c *Config) compileKinds(ctx context.Context, dir string, v *validator) {
	total := 0 // the images' pixel bytes so far (addImages)
	for i := range c.Workloads {
		w := &c.Workloads[i]
		if !w.Kinds.Any() && w.Kinds.ToolChoice == "" {
			continue
		}
		p := path{"workloads", i}
		flavor := FlavorOpenAIChat
		if t, ok := c.Target(w.Target); ok {
			flavor = t.Flavor
		}
		if w.Sessions != nil && w.Sessions.Agent != nil {
			validateAgentKinds(ctx, v, p, w, flavor, dir)
			continue
		}
		if w.Replay != nil || w.Sessions != nil {
			// A recorded body carries its own tools and images; a
			// session's turns are conversations of text.
			v.add(p, kindField(&w.Kinds), "not with replay or sessions: a recorded body carries its own, and sessions are text")
			continue
		}
		w.Kinds.validate(ctx, v, p, flavor, dir)
		total = addImages(v, p, &w.Kinds, total)
	}
	for _, name := range c.moduleNames() {
		m := c.Modules[name]
		if !m.Kinds.Any() && m.Kinds.ToolChoice == "" {
			continue
		}
		flavor := m.Flavor
		if flavor == "" {
			flavor = FlavorOpenAIChat
			if t, ok := c.Target(m.Target); ok {
				flavor = t.Flavor
			}
		}
		if m.Kind == ModuleKindPerplexity {
			v.add(path{"modules", name}, kindField(&m.Kinds), "not with kind perplexity, which sends a reference text")
			continue
		}
		m.Kinds.validate(ctx, v, path{"modules", name}, flavor, dir)
		total = addImages(v, path{"modules", name}, &m.Kinds, total)
		c.Modules[name] = m
	}
}

// addImages adds the pixel bytes of k's images, when they are within the
// bounds of one request, to total, the sum of the workloads and modules
// before p, and refuses the images that take it past
// MaxTotalImagePixelBytes. It returns the new sum.
func addImages(v *validator, p path, k *RequestKinds, total int) int {
	im := k.Images
	if im == nil || im.Count < 1 || im.Count > MaxImages || im.Width < 1 || im.Width > MaxImageSide ||
		im.Height < 1 || im.Height > MaxImageSide || im.Count*im.Width*im.Height*3 > MaxImagePixelBytes {
		// None, or refused already.
		return total
	}
	n := im.Count * im.Width * im.Height * 3
	if total+n > MaxTotalImagePixelBytes {
		v.add(append(append(path{}, p...), "images"), "count", fmt.Sprintf("these %d images of %dx%d (%s of pixels) take the images of the configuration's workloads and modules to %d bytes of pixels: at most %d (%s) in all, each held encoded in memory while the configuration runs (config.MaxTotalImagePixelBytes)",
			im.Count, im.Width, im.Height, byteSize(int64(n)), total+n, MaxTotalImagePixelBytes, byteSize(MaxTotalImagePixelBytes)))
	}
	return total + n
}

// kindField names the first kind set, for an error about all of them.
func kindField(k *RequestKinds) string {
	switch {
	case len(k.Tools) > 0:
		return "tools"
	case k.ResponseFormat != nil:
		return "response_format"
	case k.Images != nil:
		return "images"
	}
	return "tool_choice"
}

// takes says whether flavor's API has a field for kind k (FlavorFacts.Kinds);
// a flavor with none drops the kind silently, and its answers would be
// judged against a request that was never made.
func takes(flavor Flavor, k Kinds) bool {
	f, ok := flavor.Facts()
	return ok && f.Takes(k)
}

func (k *RequestKinds) validate(ctx context.Context, v *validator, p path, flavor Flavor, dir string) {
	at := func(field ...any) path { return append(append(path{}, p...), field...) }
	if len(k.Tools) > 0 && !takes(flavor, KindTools) {
		v.add(p, "tools", fmt.Sprintf("flavor %s has no tools; flavors that do: %v", flavor, flavorsTaking(KindTools)))
	}
	if len(k.Tools) > MaxTools {
		v.add(p, "tools", fmt.Sprintf("at most %d tools, got %d", MaxTools, len(k.Tools)))
	}
	names := map[string]bool{}
	for i := range k.Tools {
		t := &k.Tools[i]
		switch {
		case !toolNameRE.MatchString(t.Name):
			v.add(at("tools", i), "name", fmt.Sprintf("%s must match %s", quote(t.Name), toolNameRE))
		case names[t.Name]:
			v.add(at("tools", i), "name", fmt.Sprintf("%s is used by another tool", quote(t.Name)))
		}
		names[t.Name] = true
		params := t.Parameters
		if params == nil {
			params = map[string]any{"type": "object"}
		}
		t.ParametersJSON, t.Schema = compileSchema(ctx, v, at("tools", i, "parameters"), params)
	}
	switch choice := k.ToolChoice; {
	case choice == "":
		if len(k.Tools) > 0 {
			k.ToolChoice = ToolChoiceAuto
		}
	case len(k.Tools) == 0:
		v.add(p, "tool_choice", "only with tools")
	case choice != ToolChoiceAuto && choice != ToolChoiceRequired && !names[choice]:
		v.add(p, "tool_choice", fmt.Sprintf("%s is not auto, required or the name of a tool", quote(choice)))
	}
	if rf := k.ResponseFormat; rf != nil {
		rf.validate(ctx, v, p, flavor, dir)
	}
	if im := k.Images; im != nil {
		ip := at("images")
		if !takes(flavor, KindImages) {
			v.add(p, "images", fmt.Sprintf("flavor %s has no images; flavors that do: %v", flavor, flavorsTaking(KindImages)))
		}
		if im.Format == "" {
			im.Format = ImagePNG
		}
		switch {
		case im.Count < 1 || im.Count > MaxImages:
			v.add(ip, "count", fmt.Sprintf("must be between 1 and %d", MaxImages))
		case im.Width < 1 || im.Width > MaxImageSide:
			v.add(ip, "width", fmt.Sprintf("must be between 1 and %d", MaxImageSide))
		case im.Height < 1 || im.Height > MaxImageSide:
			v.add(ip, "height", fmt.Sprintf("must be between 1 and %d", MaxImageSide))
		case im.Format != ImagePNG && im.Format != ImageJPEG:
			v.add(ip, "format", fmt.Sprintf("%s is not png or jpeg", quote(im.Format)))
		case im.Count*im.Width*im.Height*3 > MaxImagePixelBytes:
			v.add(ip, "count", fmt.Sprintf("%d images of %dx%d are %s of pixels: at most %s a request (config.MaxImagePixelBytes)",
				im.Count, im.Width, im.Height, byteSize(int64(im.Count*im.Width*im.Height*3)), byteSize(MaxImagePixelBytes)))
		}
	}
}

// validate checks a response format asked of flavor's API at p (the
// format's holder), and compiles its schema.
func (rf *ResponseFormat) validate(ctx context.Context, v *validator, p path, flavor Flavor, dir string) {
	rp := append(append(path{}, p...), "response_format")
	if !takes(flavor, KindResponseFormat) {
		v.add(p, "response_format", fmt.Sprintf("flavor %s has no response format; flavors that do: %v", flavor, flavorsTaking(KindResponseFormat)))
	}
	switch rf.Type {
	case ResponseJSONObject:
		if rf.Schema != nil || rf.SchemaFile != "" {
			v.add(rp, "schema", "only with type json_schema")
		}
		if rf.Strict != nil {
			v.add(rp, "strict", "only with type json_schema")
		}
	case ResponseJSONSchema:
		if rf.Name == "" {
			rf.Name = "answer"
		} else if !toolNameRE.MatchString(rf.Name) {
			v.add(rp, "name", fmt.Sprintf("%s must match %s", quote(rf.Name), toolNameRE))
		}
		switch {
		case rf.Schema != nil && rf.SchemaFile != "":
			v.add(rp, "schema_file", "set either schema or schema_file, not both")
		case rf.Schema != nil:
			rf.SchemaJSON, rf.Compiled = compileSchema(ctx, v, append(rp, "schema"), rf.Schema)
		case rf.SchemaFile != "":
			rf.SchemaJSON, rf.Compiled = compileSchemaFile(ctx, v, append(rp, "schema_file"), dir, rf.SchemaFile)
		default:
			v.add(rp, "schema", "is required with type json_schema (or schema_file)")
		}
		rf.checkStrict(v, rp, flavor, dir)
	default:
		v.add(rp, "type", fmt.Sprintf("%s is not json_object or json_schema", quote(rf.Type)))
	}
}

// checkStrict refuses a strict flag that flavor's API cannot send, and,
// where it sends one that is true, a compiled schema that breaks OpenAI's
// strict rules, at rp (the response format; its schema file relative to
// dir): a server applying them would answer every request with a 400, and
// the workload would measure nothing but failures.
func (rf *ResponseFormat) checkStrict(v *validator, rp path, flavor Flavor, dir string) {
	facts, _ := flavor.Facts()
	if !facts.SendsStrict() {
		if rf.Strict != nil && *rf.Strict {
			v.add(rp, "strict", fmt.Sprintf("flavor %s sends no strict flag (its format is the schema itself); flavors that do: %v", flavor, flavorsSendingStrict()))
		}
		return
	}
	if !rf.StrictSchema() || rf.SchemaJSON == nil {
		return
	}
	var doc any
	if err := json.Unmarshal(rf.SchemaJSON, &doc); err != nil {
		// Compiled already: it is JSON.
		return
	}
	found := strictViolations(doc)
	if len(found) == 0 {
		return
	}
	first := found[0]
	why := "strict is true"
	if rf.Strict == nil {
		why += " (the default)"
	}
	why += ", and OpenAI's structured outputs refuse every request whose schema has " + first.reason +
		": set additionalProperties: false and list every property in required (an optional one with a type that allows null), or set strict: false"
	if n := len(found) - 1; n > 0 {
		why += fmt.Sprintf(" (and %d more)", n)
	}
	if file := rf.SchemaFile; file != "" {
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		v.add(rp, "schema_file", fmt.Sprintf("%s: at %s: %s", file, jsonPointer(first.at), why))
		return
	}
	v.addPath(append(append(append(path{}, rp...), "schema"), first.at...), why)
}

// flavorsSendingStrict are the flavors that send json_schema's strict flag.
func flavorsSendingStrict() []Flavor {
	var out []Flavor
	for _, f := range flavorTable {
		if f.SendsStrict() {
			out = append(out, f.Name)
		}
	}
	return out
}

// compileSchema encodes a schema written in YAML as JSON and compiles it.
func compileSchema(ctx context.Context, v *validator, p path, doc map[string]any) (json.RawMessage, *jsonschema.Schema) {
	b, err := json.Marshal(doc)
	if err != nil {
		// YAML that JSON cannot say: a mapping with non-string keys.
		v.addPath(p, fmt.Sprintf("is not a JSON document: %v", err))
		return nil, nil
	}
	return compileSchemaJSON(ctx, v, p, "", b)
}

// compileSchemaFile reads a schema's JSON file (bounded) and compiles it.
func compileSchemaFile(ctx context.Context, v *validator, p path, dir, file string) (json.RawMessage, *jsonschema.Schema) {
	if !filepath.IsAbs(file) {
		file = filepath.Join(dir, file)
	}
	rctx, cancel := context.WithTimeout(ctx, secretReadTimeout)
	defer cancel()
	b, err := readBounded(rctx, file, MaxSchemaBytes)
	if err != nil {
		v.addPath(p, fmt.Sprintf("cannot read %s: %v", file, err))
		return nil, nil
	}
	return compileSchemaJSON(ctx, v, p, file, b)
}

// schemaURL is where the compiler keeps the schema being compiled.
const schemaURL = "mem:///schema.json"

// compileSchemaJSON compiles a JSON Schema with no loader: a $ref outside
// the document (a URL, a file) is refused, so loading a configuration
// never reaches the network or another file. Its shape is bounded before
// it is compiled (MaxSchemaDepth, MaxSubschemas), so that no schema within
// MaxSchemaBytes takes long to compile, and its cost per answer after
// (MaxSchemaEvaluations), so that none can take long to check. A schema
// whose text was compiled already in this load is not compiled again. A
// load stopped (ctx: SIGTERM during --config.check, say) compiles no
// further schema. file names the schema's file in its errors ("" inline).
func compileSchemaJSON(ctx context.Context, v *validator, p path, file string, b []byte) (json.RawMessage, *jsonschema.Schema) {
	refuse := func(reason string) (json.RawMessage, *jsonschema.Schema) {
		if file != "" {
			reason = file + ": " + reason
		}
		v.addPath(p, reason)
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return refuse(fmt.Sprintf("not compiled: the load was stopped (%v)", err))
	}
	if len(b) > MaxSchemaBytes {
		return refuse(fmt.Sprintf("a schema of %s: at most %s (config.MaxSchemaBytes)", byteSize(int64(len(b))), byteSize(MaxSchemaBytes)))
	}
	if c, ok := v.schemas[string(b)]; ok {
		if c.refused != "" {
			return refuse(c.refused)
		}
		return c.compact, c.schema
	}
	compact, schema, why := compileSchemaText(b)
	if v.schemas == nil {
		v.schemas = map[string]compiledSchema{}
	}
	v.schemas[string(b)] = compiledSchema{compact, schema, why}
	if why != "" {
		return refuse(why)
	}
	return compact, schema
}

// compiledSchema is a schema's JSON text compiled: its compact text and
// the schema, or why it was refused. A compiled schema is read only, and
// so shared by every workload and module that has the same text.
type compiledSchema struct {
	compact json.RawMessage
	schema  *jsonschema.Schema
	refused string
}

// compileSchemaText compiles a schema's JSON text within the bounds
// compileSchemaJSON says, or says why not.
func compileSchemaText(b []byte) (json.RawMessage, *jsonschema.Schema, string) {
	refuse := func(reason string) (json.RawMessage, *jsonschema.Schema, string) { return nil, nil, reason }
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return refuse(fmt.Sprintf("is not JSON: %v", err))
	}
	if _, ok := doc.(map[string]any); !ok {
		return refuse("a schema is a JSON object")
	}
	switch depth, subs := schemaShape(doc); {
	case depth > MaxSchemaDepth:
		return refuse(fmt.Sprintf("nested more than %d levels deep: at most %d (config.MaxSchemaDepth)", MaxSchemaDepth, MaxSchemaDepth))
	case subs > MaxSubschemas:
		return refuse(fmt.Sprintf("more than %d subschemas (objects and booleans): at most %d (config.MaxSubschemas)", MaxSubschemas, MaxSubschemas))
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return refuse(fmt.Sprintf("is not a JSON Schema: %v", err))
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return refuse(fmt.Sprintf("is not a valid JSON Schema: %v", err))
	}
	depth, evals, err := schemaCost(s)
	if err != nil {
		return refuse(err.Error())
	}
	if evals > MaxSchemaEvaluations {
		return refuse(fmt.Sprintf("checking one value %d levels deep in an answer can take more than %d evaluations of its subschemas: at most %d (config.MaxSchemaEvaluations); "+
			"members of anyOf, oneOf or allOf that each recurse into the same value multiply them at each level, where an if/then/else on a property that tells the kinds apart evaluates one",
			depth, MaxSchemaEvaluations, MaxSchemaEvaluations))
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		return refuse(fmt.Sprintf("is not JSON: %v", err))
	}
	return compact.Bytes(), s, ""
}

// CheckKinds validates k as the request kinds of requests sent with flavor,
// reads its schema files (relative to dir) and compiles its schemas, as
// Parse does for a workload's: for the bench's shapes, whose file is the
// bench's. Each problem's path is below the kinds' holder.
func CheckKinds(ctx context.Context, k *RequestKinds, flavor Flavor, dir string) []LengthProblem {
	v := &validator{}
	k.validate(ctx, v, path{}, flavor, dir)
	out := make([]LengthProblem, len(v.paths))
	for i, p := range v.paths {
		out[i] = LengthProblem{Path: p.path, Reason: p.reason}
	}
	return out
}

// validateAgentKinds checks an agent workload's kinds: tools (and a
// tool_choice) only, on openai-chat, whose messages carry the calls and
// their results.
func validateAgentKinds(ctx context.Context, v *validator, p path, w *Workload, flavor Flavor, dir string) {
	if flavor != FlavorOpenAIChat {
		v.add(p, "sessions", fmt.Sprintf("an agent needs flavor %s (its turns carry tool calls and their results as chat messages), the target's is %s", FlavorOpenAIChat, flavor))
		return
	}
	if w.Kinds.ResponseFormat != nil || w.Kinds.Images != nil {
		v.add(p, kindField(&w.Kinds), "not with an agent: its turns carry tools only")
		return
	}
	w.Kinds.validate(ctx, v, p, flavor, dir)
}
