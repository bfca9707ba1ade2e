package simulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Version is what GET /version reports.
const Version = "0.11.0+sim"

// ArrivalHeader carries, on every response, the instant the handler received
// the request, in Unix nanoseconds.
const ArrivalHeader = "X-Sim-Arrival-Unix-Nano"

// maxRequestBody bounds request bodies; a prompt of MaxModelLen words fits
// many times over.
const maxRequestBody = 64 << 20

// Simulator is an in-process inference server. Create it with New, serve its
// Handler, and Close it when done.
type Simulator struct {
	cfg      Config
	logger   *slog.Logger
	faults   atomic.Pointer[Faults]
	engine   *engine
	registry *prometheus.Registry
	handler  http.Handler
	created  int64
	started  time.Time // StartedAt; ReadyAt is started + cfg.LoadDelay

	rngMu sync.Mutex
	rng   *rand.Rand // injected-error draws
	reqs  atomic.Uint64

	modelJSON []byte // the model name as a JSON string
	// models are the names served as JSON strings: [0] the base model's
	// (modelJSON), [i+1] LoRA adapter i's; adapterKeys the adapters'
	// prefix-cache keys (adapterKeys[0] = 0: the base model's).
	models      [][]byte
	adapterKeys []uint64

	cancel    context.CancelFunc
	closing   chan struct{}
	closeOnce sync.Once
}

// New validates cfg, builds the simulator and starts its engine goroutine.
// Close stops it.
func New(cfg Config, logger *slog.Logger) (*Simulator, error) {
	cfg.Faults = cfg.Faults.normalized()
	if cfg.Engine == "" {
		cfg.Engine = EngineVLLM
	}
	if cfg.ReasoningField == "" {
		cfg.ReasoningField = ReasoningFieldReasoning
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("simulator config: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	modelJSON, err := json.Marshal(cfg.Model)
	if err != nil {
		return nil, err
	}
	cfg.LoRAAdapters = slices.Clone(cfg.LoRAAdapters)
	models, keys := [][]byte{modelJSON}, []uint64{0}
	for _, name := range cfg.LoRAAdapters {
		b, err := json.Marshal(name)
		if err != nil {
			return nil, err
		}
		models, keys = append(models, b), append(keys, adapterKey(name))
	}
	started := time.Now()
	s := &Simulator{
		cfg:       cfg,
		logger:    logger,
		registry:  prometheus.NewRegistry(),
		created:   started.Unix(),
		started:   started,
		rng:       rand.New(rand.NewPCG(cfg.Seed, 0x5157fa17)),
		modelJSON: modelJSON,
		models:    models,
		closing:   make(chan struct{}),
	}
	s.adapterKeys = keys
	f := cfg.Faults
	s.faults.Store(&f)
	m := newMetrics(s.registry, cfg.Model, cfg.MaxModelLen)
	var lora *loraInfo
	if cfg.MaxLoRA > 0 {
		lora = newLoRAInfo(cfg.MaxLoRA, time.Now)
		s.registry.MustRegister(lora)
	}
	registerProcessStart(s.registry, started)
	registerCacheConfig(s.registry, cfg.BlockSize, cfg.KVBlocks)
	s.engine = newEngine(&s.cfg, m, &s.faults)
	s.engine.sched.lora = lora
	s.handler = s.loadGate(s.routes())

	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.engine.run(ctx)
	return s, nil
}

// Close stops the engine. Requests in flight end at once: streams are cut
// (the connection is closed without [DONE]) and new requests get 503. It
// returns when the engine goroutine has exited, and is safe to call more than
// once.
func (s *Simulator) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.cancel()
	})
	<-s.engine.done
	return nil
}

// Config is the configuration the simulator runs with, faults as they were
// at start.
func (s *Simulator) Config() Config { return s.cfg }

// Faults is the current fault injection.
func (s *Simulator) Faults() Faults { return *s.faults.Load() }

// SetFaults replaces the fault injection for requests that arrive from now
// on (and, for Slowdown, steps that start from now on). Zero Slowdown and
// ErrorStatus mean their defaults.
func (s *Simulator) SetFaults(f Faults) error {
	f = f.normalized()
	if err := f.Validate(); err != nil {
		return err
	}
	s.faults.Store(&f)
	s.logger.Info("fault injection changed", "faults", f)
	return nil
}

// Registry is the registry behind /metrics.
func (s *Simulator) Registry() *prometheus.Registry { return s.registry }

// Handler serves every route: the OpenAI-compatible API, /health, /version,
// /tokenize, /metrics and /admin/faults.
func (s *Simulator) Handler() http.Handler { return s.handler }

func (s *Simulator) routes() http.Handler {
	mux := http.NewServeMux()
	// Every route stamps its arrival first (arrive).
	handle := func(pattern string, h func(http.ResponseWriter, *http.Request, time.Time)) {
		mux.HandleFunc(pattern, s.arrive(h))
	}
	e := s.cfg.Engine
	if servesOpenAI(e) {
		handle("POST /v1/completions", s.handleCompletions)
		handle("POST /v1/chat/completions", s.handleChatCompletions)
		handle("GET /v1/models", s.handleModels)
	}
	handle("GET /health", s.handleHealth)
	switch e {
	case EngineVLLM, EngineVLLMLegacy:
		handle("POST /v1/responses", s.handleResponses)
		handle("GET /version", s.handleVersion)
		handle("POST /tokenize", s.handleTokenize)
	case EngineSGLang:
		handle("POST /generate", s.handleSGLangGenerate)
		handle("GET /get_model_info", s.handleSGLangModelInfo)
		handle("GET /get_server_info", s.handleSGLangServerInfo)
		handle("POST /tokenize", s.handleTokenize)
	case EngineTGI:
		handle("POST /generate_stream", s.handleTGIGenerateStream)
		handle("POST /generate", s.handleTGIGenerate)
		handle("GET /info", s.handleTGIInfo)
		handle("POST /tokenize", s.handleTGITokenize)
	case EngineLlamaCpp:
		handle("POST /completion", s.handleLlamaCppCompletion)
		handle("GET /props", s.handleLlamaCppProps)
		handle("POST /tokenize", s.handleLlamaCppTokenize)
	case EngineOllama:
		handle("POST /api/generate", s.handleOllamaGenerate)
		handle("POST /api/chat", s.handleOllamaChat)
		handle("GET /api/version", s.handleOllamaVersion)
		handle("GET /api/ps", s.handleOllamaPS)
		handle("GET /api/tags", s.handleOllamaTags)
		// Ollama's liveness answer, which its clients poll.
		handle("GET /{$}", func(w http.ResponseWriter, _ *http.Request, _ time.Time) {
			w.Write([]byte("Ollama is running"))
		})
	case EngineTriton:
		handle("POST /v2/models/{model}/generate_stream", s.handleTritonGenerateStream)
		handle("GET /v2/models/{model}", s.handleTritonModel)
		handle("GET /v2", s.handleTritonServer)
		// KServe v2 readiness: 200 with an empty body when ready.
		handle("GET /v2/health/ready", s.handleHealth)
	}
	var metricsHandler http.Handler = promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{})
	if h := s.metricsHandler(); h != nil {
		metricsHandler = h
	}
	if e != EngineOllama { // Ollama serves no /metrics
		handle("GET /metrics", func(w http.ResponseWriter, r *http.Request, _ time.Time) {
			metricsHandler.ServeHTTP(w, r)
		})
	}
	handle("GET /admin/faults", s.handleGetFaults)
	handle("PUT /admin/faults", s.handleSetFaults)
	handle("POST /admin/faults", s.handleSetFaults)
	return mux
}

// arrive stamps the arrival instant on the response before anything else.
func (s *Simulator) arrive(h func(http.ResponseWriter, *http.Request, time.Time)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		arrival := time.Now()
		w.Header().Set(ArrivalHeader, strconv.FormatInt(arrival.UnixNano(), 10))
		h(w, r, arrival)
	}
}

// writeError writes vLLM's error body:
// {"error":{"message":...,"type":...,"param":null,"code":status}}.
func writeError(w http.ResponseWriter, status int, message string) {
	typ := map[int]string{
		http.StatusBadRequest:          "BadRequestError",
		http.StatusNotFound:            "NotFoundError",
		http.StatusTooManyRequests:     "RateLimitError",
		http.StatusInternalServerError: "InternalServerError",
		http.StatusServiceUnavailable:  "ServiceUnavailableError",
	}[status]
	if typ == "" {
		typ = http.StatusText(status)
	}
	type errorInfo struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    int     `json:"code"`
	}
	body, _ := json.Marshal(struct {
		Error errorInfo `json:"error"`
	}{errorInfo{Message: message, Type: typ, Code: status}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// handleModels lists the base model, then each LoRA adapter as vLLM's
// serving_models does: its id the adapter's name, root where it was
// loaded from (the simulator has no path: the name), parent the base
// model, and no max_model_len.
func (s *Simulator) handleModels(w http.ResponseWriter, _ *http.Request, _ time.Time) {
	type model struct {
		ID          string  `json:"id"`
		Object      string  `json:"object"`
		Created     int64   `json:"created"`
		OwnedBy     string  `json:"owned_by"`
		Root        string  `json:"root"`
		Parent      *string `json:"parent"`
		MaxModelLen *int    `json:"max_model_len"`
	}
	data := []model{{s.cfg.Model, "model", s.created, "vllm", s.cfg.Model, nil, &s.cfg.MaxModelLen}}
	for _, name := range s.cfg.LoRAAdapters {
		data = append(data, model{name, "model", s.created, "vllm", name, &s.cfg.Model, nil})
	}
	writeJSON(w, struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{"list", data})
}

func (s *Simulator) handleHealth(w http.ResponseWriter, _ *http.Request, _ time.Time) {
	select {
	case <-s.closing:
		w.WriteHeader(http.StatusServiceUnavailable)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

func (s *Simulator) handleVersion(w http.ResponseWriter, _ *http.Request, _ time.Time) {
	writeJSON(w, map[string]string{"version": Version})
}

func (s *Simulator) handleTokenize(w http.ResponseWriter, r *http.Request, _ time.Time) {
	var req struct {
		Model               string            `json:"model"`
		Prompt              *string           `json:"prompt"`
		Messages            []chatMessageJSON `json:"messages"`
		AddGenerationPrompt *bool             `json:"add_generation_prompt"`
	}
	if err := decodeBody(w, r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if _, status, err := s.checkModel(req.Model); err != nil {
		writeError(w, status, err.Error())
		return
	}
	var ids []int
	switch {
	case req.Prompt != nil && req.Messages == nil:
		ids = AppendTokenIDs(nil, *req.Prompt)
	case req.Messages != nil && req.Prompt == nil:
		msgs, images, err := chatMessages(req.Messages)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		addGen := req.AddGenerationPrompt == nil || *req.AddGenerationPrompt
		ids, err = s.chatTokenIDs(msgs, images, addGen)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	default:
		writeError(w, http.StatusBadRequest, "exactly one of prompt and messages is required")
		return
	}
	if ids == nil {
		ids = []int{}
	}
	writeJSON(w, struct {
		Count       int   `json:"count"`
		MaxModelLen int   `json:"max_model_len"`
		Tokens      []int `json:"tokens"`
	}{len(ids), s.cfg.MaxModelLen, ids})
}

func (s *Simulator) handleGetFaults(w http.ResponseWriter, _ *http.Request, _ time.Time) {
	writeJSON(w, s.Faults())
}

func (s *Simulator) handleSetFaults(w http.ResponseWriter, r *http.Request, _ time.Time) {
	var f Faults
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err == nil {
		err = f.UnmarshalJSON(body)
	}
	if err == nil {
		err = s.SetFaults(f)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid faults: "+err.Error())
		return
	}
	writeJSON(w, s.Faults())
}

// decodeBody decodes a JSON request body into v, ignoring unknown fields
// like vLLM does.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid JSON body: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("invalid JSON body: data after the top-level value")
	}
	return nil
}

// checkModel resolves a request's model: the base model (or none) is
// lora 0, LoRA adapter i is lora i+1; any other name is a 404, as vLLM
// answers it.
func (s *Simulator) checkModel(model string) (lora, status int, err error) {
	if model == "" || model == s.cfg.Model {
		return 0, 0, nil
	}
	if i := slices.Index(s.cfg.LoRAAdapters, model); i >= 0 {
		return i + 1, 0, nil
	}
	return 0, http.StatusNotFound, fmt.Errorf("The model `%s` does not exist.", model)
}

// modelName is the JSON string of the model a request named: the base
// model, or LoRA adapter lora-1.
func (s *Simulator) modelName(lora int) []byte { return s.models[lora] }

// injectError draws whether this request gets an injected error.
func (s *Simulator) injectError(f *Faults) bool {
	if f.ErrorRate <= 0 {
		return false
	}
	s.rngMu.Lock()
	x := s.rng.Float64()
	s.rngMu.Unlock()
	return x < f.ErrorRate
}

// sleep waits d, or less if the request or the simulator ends; it reports
// whether the full wait elapsed.
func (s *Simulator) sleep(ctx context.Context, d time.Duration) bool {
	return wait(d, ctx.Done(), s.closing)
}

// wait waits d, or less if a or b is closed (a nil channel never is); it
// reports whether the full wait elapsed.
func wait(d time.Duration, a, b <-chan struct{}) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-a:
	case <-b:
	}
	return false
}

// Serve runs a simulator on listenAddress until ctx is done, then closes it:
// streams in flight are cut and the HTTP server shuts down.
func Serve(ctx context.Context, listenAddress string, cfg Config, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	sim, err := New(cfg, logger)
	if err != nil {
		return err
	}
	return sim.ListenAndServe(ctx, listenAddress)
}

// ListenAndServe serves the simulator on listenAddress until ctx is done,
// then closes it (streams in flight are cut) and shuts the HTTP server
// down. In LoadRefuse mode it listens only once the model load is over, so
// that connections are refused until ReadyAt.
func (s *Simulator) ListenAndServe(ctx context.Context, listenAddress string) error {
	defer s.Close()
	logger := s.logger
	if s.cfg.LoadDelay > 0 && s.cfg.loadMode() == LoadRefuse {
		logger.Info("simulator loading: not listening until loaded", "address", listenAddress, "load_delay", s.cfg.LoadDelay)
		if !s.waitLoaded(ctx.Done()) {
			return nil
		}
	}
	ln, err := net.Listen("tcp", listenAddress)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	logger.Info("simulator listening", "address", ln.Addr().String(), "model", s.cfg.Model, "time_scale", s.cfg.TimeScale)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.Close()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	<-errc
	return err
}
