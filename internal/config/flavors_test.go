package config

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	flavorNameRE   = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)
	providerNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

// flavorFactChecks are the facts every flavor must state, one check each:
// a check returns what is wrong with the fact, "" when nothing is.
var flavorFactChecks = []struct {
	fact  string
	check func(FlavorFacts) string
}{
	{"Name", func(f FlavorFacts) string {
		if !flavorNameRE.MatchString(string(f.Name)) {
			return "a flavor name is lower-case words joined by '-'"
		}
		return ""
	}},
	{"Prompt", func(f FlavorFacts) string {
		if f.Prompt != PromptChat && f.Prompt != PromptText {
			return "is neither PromptChat nor PromptText"
		}
		return ""
	}},
	{"Provider", func(f FlavorFacts) string {
		if !providerNameRE.MatchString(f.Provider) {
			return "gen_ai.provider.name is a lower-case snake_case word"
		}
		return ""
	}},
	{"Perplexity", func(f FlavorFacts) string {
		if (f.PerplexityDialect == "") == (f.NoPerplexity == "") {
			return "set exactly one of PerplexityDialect and NoPerplexity"
		}
		return ""
	}},
	{"Kinds", func(f FlavorFacts) string {
		switch {
		case f.Kinds == 0:
			return "state the request kinds the API takes, or KindsNone"
		case f.Kinds&KindsNone != 0 && f.Kinds != KindsNone:
			return "KindsNone beside kinds"
		case f.Kinds >= KindsNone<<1:
			return "an unknown kind"
		}
		return ""
	}},
	{"BodyMembers", func(f FlavorFacts) string {
		if named := f.BodyPrompt != "" && f.BodyMaxTokens != "" && f.Path != ""; named != f.OpenAIAPI() || (f.BodyPrompt == "") != (f.BodyMaxTokens == "") || (f.BodyPrompt == "") != (f.Path == "") {
			return "an OpenAI API names its body's prompt and cap members and its path (BodyPrompt, BodyMaxTokens, Path), another flavor none"
		}
		return ""
	}},
}

// flavorFactProblems lists what is missing or wrong in f.
func flavorFactProblems(f FlavorFacts) []string {
	var out []string
	for _, c := range flavorFactChecks {
		if why := c.check(f); why != "" {
			out = append(out, c.fact+": "+why)
		}
	}
	return out
}

// TestFlavorFacts: every registered flavor states every fact.
func TestFlavorFacts(t *testing.T) {
	all := AllFlavors()
	if len(all) == 0 {
		t.Fatal("no flavors")
	}
	for _, f := range all {
		for _, c := range flavorFactChecks {
			t.Run(string(f.Name)+"/"+c.fact, func(t *testing.T) {
				if why := c.check(f); why != "" {
					t.Errorf("flavor %q: %s: %s (%+v)", f.Name, c.fact, why, f)
				}
			})
		}
		if got, ok := f.Name.Facts(); !ok || got != f {
			t.Errorf("Flavor(%q).Facts() = %+v, %v", f.Name, got, ok)
		}
	}
	if !slices.IsSortedFunc(all, func(a, b FlavorFacts) int { return strings.Compare(string(a.Name), string(b.Name)) }) {
		t.Error("flavorTable is not sorted by name")
	}
	for i := 1; i < len(all); i++ {
		if all[i].Name == all[i-1].Name {
			t.Errorf("flavor %q is listed twice", all[i].Name)
		}
	}
	if _, ok := FlavorOpenAIChat.Facts(); !ok {
		t.Errorf("the default flavor %q has no facts", FlavorOpenAIChat)
	}
	if f, ok := Flavor("openai").Facts(); ok {
		t.Errorf("Flavor(openai).Facts() = %+v, true", f)
	}
}

// TestFlavorFactChecksCatchMissing: the checks of TestFlavorFacts notice
// any one fact missing from any flavor. Each field of FlavorFacts is
// cleared in turn in every entry that sets it; some check must then
// complain. A field added to FlavorFacts without a check fails here.
func TestFlavorFactChecksCatchMissing(t *testing.T) {
	typ := reflect.TypeFor[FlavorFacts]()
	for i := range typ.NumField() {
		field := typ.Field(i)
		set := 0
		for _, f := range AllFlavors() {
			v := reflect.ValueOf(&f).Elem().Field(i)
			if v.IsZero() {
				continue
			}
			set++
			v.SetZero()
			if len(flavorFactProblems(f)) == 0 {
				t.Errorf("flavor %q without %s passes every check", f.Name, field.Name)
			}
		}
		if set == 0 {
			t.Errorf("no flavor sets %s: a fact nobody states, or one whose absence no check can see", field.Name)
		}
	}
}

// TestFlavorViews: the lists derived from the table.
func TestFlavorViews(t *testing.T) {
	if want := []string{"llamacpp", "ollama-chat", "ollama-generate", "openai-chat", "openai-completions", "openai-responses", "sglang", "tgi", "triton"}; !slices.Equal(Flavors, want) {
		t.Errorf("Flavors = %v, want %v", Flavors, want)
	}
	if want := []string{"openai-chat", "openai-completions", "sglang", "tgi"}; !slices.Equal(PerplexityFlavors, want) {
		t.Errorf("PerplexityFlavors = %v, want %v", PerplexityFlavors, want)
	}
	for _, tc := range []struct {
		kind Kinds
		want []Flavor
	}{
		{KindTools, []Flavor{"ollama-chat", "openai-chat", "openai-responses"}},
		{KindResponseFormat, []Flavor{"ollama-chat", "ollama-generate", "openai-chat", "openai-completions", "openai-responses"}},
		{KindImages, []Flavor{"ollama-chat", "ollama-generate", "openai-chat", "openai-responses"}},
		{KindTools | KindImages, []Flavor{"ollama-chat", "openai-chat", "openai-responses"}},
		{0, nil},
	} {
		if got := flavorsTaking(tc.kind); !slices.Equal(got, tc.want) {
			t.Errorf("flavorsTaking(%b) = %v, want %v", tc.kind, got, tc.want)
		}
	}
	if got, want := BodyMaxTokensMembers(), []string{"max_tokens", "max_output_tokens"}; !slices.Equal(got, want) {
		t.Errorf("BodyMaxTokensMembers() = %v, want %v", got, want)
	}
	if len(PerplexityUnsupported)+len(PerplexityFlavors) != len(Flavors) {
		t.Errorf("%d unsupported and %d scorable flavors of %d", len(PerplexityUnsupported), len(PerplexityFlavors), len(Flavors))
	}
}

// TestRecordedBodyFlavor: a recorded body's API, by its members.
func TestRecordedBodyFlavor(t *testing.T) {
	for _, tc := range []struct {
		members []string
		want    Flavor
		told    bool
	}{
		{[]string{"messages"}, "openai-chat", true},
		{[]string{"prompt"}, "openai-completions", true},
		{[]string{"input"}, "openai-responses", true},
		{[]string{"input", "max_tokens"}, "openai-responses", true},
		// max_output_tokens is the Responses API's own: it tells the API
		// whatever the prompt member.
		{[]string{"messages", "max_output_tokens"}, "openai-responses", true},
		{[]string{"prompt", "max_output_tokens"}, "openai-responses", true},
		// Two prompt members, or none: the default flavor, untold.
		{[]string{"input", "messages"}, "openai-chat", false},
		{[]string{"input", "prompt"}, "openai-chat", false},
		{nil, "openai-chat", false},
		{[]string{"inputs", "text"}, "openai-chat", false},
	} {
		got, told := RecordedBodyFlavor(func(m string) bool { return slices.Contains(tc.members, m) })
		if got.Name != tc.want || told != tc.told {
			t.Errorf("%v: %s (told %v), want %s (told %v)", tc.members, got.Name, told, tc.want, tc.told)
		}
	}
}

// TestRecordedPathFlavor: a recorded request's API, by its path.
func TestRecordedPathFlavor(t *testing.T) {
	for _, tc := range []struct {
		path string
		want Flavor // "" for none
	}{
		{"/v1/chat/completions", "openai-chat"},
		{"/chat/completions", "openai-chat"},
		{"/v1/completions", "openai-completions"},
		{"/openai/v1/completions", "openai-completions"},
		{"/v1/responses", "openai-responses"},
		{"/v1/responses/resp_1/cancel", ""},
		{"/v1/embeddings", ""},
		{"/generate", ""},
		{"/v1/xcompletions", ""},
		{"", ""},
	} {
		got, ok := RecordedPathFlavor(tc.path)
		if got.Name != tc.want || ok != (tc.want != "") {
			t.Errorf("%q: %q (%v), want %q", tc.path, got.Name, ok, tc.want)
		}
	}
}
