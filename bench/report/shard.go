package report

import "time"

// What a recorder keeps of a repeat, whatever its configuration: bench
// merge refuses a state that holds more.
const (
	// MaxITL is the inter-token gaps kept (8 MB).
	MaxITL = 1000000
	// MaxWindowE2E is the E2E values kept per window for the stability
	// check (the first ones of the window).
	MaxWindowE2E = 10000
)

// ShardPart is what a shard's report carries for the merge: per cell and
// repeat, the recorder's exact aggregates and its request records.
type ShardPart struct {
	Index int `json:"index"`
	Count int `json:"count"`
	// StartAt is the instant given to every shard for its first repeat
	// (--shard.start-at), and SlackSeconds the room after each repeat's
	// planned length before the next one's agreed start; absent when the
	// shard started on its own.
	StartAt      *time.Time   `json:"start_at,omitempty"`
	SlackSeconds float64      `json:"slack_seconds,omitempty"`
	Cells        []ShardCells `json:"cells"`
}

// ShardCells is one cell's repeats in a shard report.
type ShardCells struct {
	Key     string          `json:"key"`
	Repeats []RecorderState `json:"repeats"`
}

// RecorderState is one repeat's recorder, serialised: every count exact,
// the request records and inter-token gaps as kept (all of them up to
// max_samples_per_repeat and MaxITL gaps; a uniform reservoir beyond),
// and at most MaxWindowE2E E2E values a window.
type RecorderState struct {
	WindowSeconds     float64        `json:"window_seconds"`
	Windows           int            `json:"windows"`
	SpanSeconds       float64        `json:"span_seconds"`
	Measured          int            `json:"measured"`
	Goodput           int            `json:"goodput"`
	ReasoningTokens   int            `json:"reasoning_tokens"`
	ReasoningRequests int            `json:"reasoning_requests"`
	Outcomes          map[string]int `json:"outcomes"`
	WinTokens         []float64      `json:"win_tokens"`
	// WinGoodTokens are WinTokens of the requests that met the SLO.
	WinGoodTokens  []float64   `json:"win_good_tokens,omitempty"`
	WinSuccesses   []int       `json:"win_successes"`
	WinCompletions []int       `json:"win_completions"`
	WinInputTokens []int       `json:"win_input_tokens,omitempty"`
	WinOffered     []int       `json:"win_offered"`
	WinDropped     []int       `json:"win_dropped"`
	WinSent        []int       `json:"win_sent"`
	WinEnded       []int       `json:"win_ended"`
	WinE2E         [][]float64 `json:"win_e2e"`
	Records        []Record    `json:"records"`
	RecordsSeen    int         `json:"records_seen"`
	ITL            []float64   `json:"itl"`
	ITLSeen        int         `json:"itl_seen"`

	// HTTPErrors are the measured requests answered with a non-2xx status,
	// by code (observation.StatusCodes); absent without any.
	HTTPErrors map[string]int `json:"http_errors,omitempty"`
	// StructuredChecks and ToolCallChecks are Stats' validity counts.
	StructuredChecks map[string]int `json:"structured_checks,omitempty"`
	ToolCallChecks   map[string]int `json:"tool_call_checks,omitempty"`

	// WinCapDropped are the arrivals the client's in-flight cap dropped, by
	// window: the queue's evidence the stability rule weighs.
	WinCapDropped []int `json:"win_cap_dropped,omitempty"`
	// InFlightCap is the shard's in-flight cap (max_in_flight; a closed
	// loop's share of clients); a merge adds them up. Absent from reports
	// written before it.
	InFlightCap int `json:"in_flight_cap,omitempty"`
	// Points are the successful measured requests the stability rule
	// judges (a uniform sample of PointsSeen beyond 20,000).
	Points     []StabilityPoint `json:"stability_points,omitempty"`
	PointsSeen int              `json:"stability_points_seen,omitempty"`
	// UsageNotBelieved is Stats' count of requests whose usage count was
	// not believed.
	UsageNotBelieved int `json:"usage_not_believed,omitempty"`
}

// StabilityPoint is one successful measured request as the stability rule
// sees it: when it ended, in seconds after the warm-up, its E2E in
// seconds, and its lengths in tokens.
type StabilityPoint struct {
	Done   float64 `json:"done"`
	E2E    float64 `json:"e2e"`
	Input  int     `json:"input"`
	Output int     `json:"output"`
}
