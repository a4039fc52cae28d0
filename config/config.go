// Package config is hexserve's configuration: the typed mirror of
// config.example.yaml, its defaults, strict YAML loading (unknown keys are
// errors) and validation with errors that name the offending key.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/url"
	"path"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/hexserve/hexserve/hexagon/qhexrt/bundle"
	"github.com/hexserve/hexserve/internal/modelfile"
	"go.yaml.in/yaml/v3"
)

// Config is the whole configuration, parsed once by cmd/server and passed down.
type Config struct {
	Server Server `yaml:"server"`
	// Model is the one model to serve, or, with Models, the defaults every
	// entry inherits for the keys it leaves unset.
	Model Model `yaml:"model"`
	// Models are several models served side by side, loaded on demand (see
	// Entries).
	Models     []Model    `yaml:"models"`
	Engine     Engine     `yaml:"engine"`
	Sampling   Sampling   `yaml:"sampling"`
	Chat       Chat       `yaml:"chat"`
	Responses  Responses  `yaml:"responses"`
	Structured Structured `yaml:"structured"`
	Log        Log        `yaml:"log"`
}

// Server configures the HTTP listener and its middleware.
type Server struct {
	Listen            string        `yaml:"listen"`              // host:port
	APIKeys           []string      `yaml:"api_keys"`            // merged with $HEXSERVE_API_KEYS
	CORSOrigins       []string      `yaml:"cors_origins"`        // exact origins, or "*"
	BodyLimit         ByteSize      `yaml:"body_limit"`          // request body limit
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"` // http.Server.ReadHeaderTimeout
	BodyTimeout       time.Duration `yaml:"body_timeout"`        // time to read a request body
	IdleTimeout       time.Duration `yaml:"idle_timeout"`        // http.Server.IdleTimeout
	ShutdownTimeout   time.Duration `yaml:"shutdown_timeout"`    // grace period for in-flight requests
	// StreamWriteTimeout drops a stream whose client stops reading.
	StreamWriteTimeout time.Duration `yaml:"stream_write_timeout"`
	TLSCertFile        string        `yaml:"tls_cert_file"` // PEM certificate chain; with tls_key_file: HTTPS
	TLSKeyFile         string        `yaml:"tls_key_file"`  // PEM private key
	// MaxLoadedModels caps the models loaded at once (0: no limit); over
	// it the least recently used idle one is unloaded.
	MaxLoadedModels int `yaml:"max_loaded_models"`
	// WebUI serves the chat page at /; unset: on when listen is loopback or
	// API keys are set (see WebUIOn).
	WebUI *bool `yaml:"web_ui"`
	// ModelAliases maps glob patterns (path.Match syntax, "claude-*") of
	// requested model names to the served model id (or one of
	// model.aliases), on every endpoint.
	ModelAliases map[string]string `yaml:"model_aliases"`
	// RelayMemory bounds the memory all upstream replies being buffered
	// hold at once (whole replies, a stream's current line, converted
	// replies); past it a request gets 503 upstream_busy.
	RelayMemory ByteSize `yaml:"relay_memory"`
	// BodyMemory bounds the bytes of all request bodies read and held at
	// once; past it a request gets 503 server_overloaded.
	BodyMemory ByteSize `yaml:"body_memory"`
	// AllowedHosts are the Host names (no port) a request may name besides
	// the loopback ones; see Hosts.
	AllowedHosts []string `yaml:"allowed_hosts"`
}

// Hosts is the server's Host check: nil (any Host) when listen is beyond
// loopback and allowed_hosts is empty, else allowed_hosts (a request may
// also name a loopback host). A server on loopback that answers any Host
// is open to DNS rebinding: a web page whose name now resolves to
// 127.0.0.1 reads it as its own origin.
func (s Server) Hosts() []string {
	if len(s.AllowedHosts) == 0 && !IsLoopback(s.Listen) {
		return nil
	}
	return append([]string{}, s.AllowedHosts...)
}

// WebUIOn reports whether the chat page is served: server.web_ui when set,
// else on for a loopback listener or when API keys are set, off for a
// listener beyond loopback without keys.
func (s Server) WebUIOn() bool {
	if s.WebUI != nil {
		return *s.WebUI
	}
	return IsLoopback(s.Listen) || len(s.APIKeys) > 0
}

// Model says which model to load and how to run it.
type Model struct {
	// Path names the model: a QHexRT bundle folder, an arch folder, a
	// manifest, an ExecuTorch .pte file or a folder holding one .pte; the
	// kind is detected from the content. Bundle is its older alias.
	Path   string `yaml:"path"`
	Bundle string `yaml:"bundle"`
	// Tokenizer is the tokenizer.json; "" looks next to the model and in up
	// to two parent folders (bundles: the manifest's tokenizer first).
	Tokenizer string    `yaml:"tokenizer"`
	ID        string    `yaml:"id"`        // served model id; "" derives it from the manifest name
	Aliases   []string  `yaml:"aliases"`   // other ids accepted in requests
	Libraries Libraries `yaml:"libraries"` // QNN shared libraries
	PerfMode  string    `yaml:"perf_mode"` // HTP performance mode: burst, sustained, balanced
	// ReasoningParser names the model's reasoning markers (vLLM's
	// --reasoning-parser): qwen3 or deepseek_r1 (<think>…</think>), or none;
	// "" detects them from the chat template (<think> in it: qwen3).
	ReasoningParser string `yaml:"reasoning_parser"`
	// ADSPLibraryPath is the ';'-separated list of folders the DSP loader
	// searches for the skel (ADSP_LIBRARY_PATH). "" keeps the environment's
	// value or, when that is unset too, uses the folders of the configured
	// libraries followed by the system DSP folders.
	ADSPLibraryPath string `yaml:"adsp_library_path"`
	// SeqKVMB is the memory (MiB) for the per-sequence KV buffer sets of a
	// QHexRT-contract bundle whose sequences take turns side by side; 0:
	// 512 MiB.
	SeqKVMB int `yaml:"seq_kv_mb"`
	// Overrides are the manifest's `hexserve` object for bundles that lack
	// it; set keys win over the manifest's.
	Overrides *bundle.Hexserve `yaml:"overrides"`
	// ToolParser is the model's tool-call format, as vLLM names them:
	// llama3_json, hermes, granite or json; "" detects it from the chat
	// template's markers (then config.json's model_type).
	ToolParser string `yaml:"tool_parser"`
	// AllowOutsidePaths lets a model's own config (a Genie bundle's
	// tokenizer, extensions and ctx-bins) name files outside its folder;
	// they then count against engine.model_memory. false: refused, naming
	// the field. model.tokenizer and the tokenizer lookup in parent
	// folders are not affected.
	AllowOutsidePaths bool `yaml:"allow_outside_paths"`

	// The keys below override the engine's for this model (on model.* with
	// a models: list, for every entry).

	// Preload loads the model at start; unset: true when only one model is
	// configured, false otherwise.
	Preload *bool `yaml:"preload"`
	// KeepAlive, QueueLength, Timeout and MaxSequences override
	// engine.keep_alive, engine.queue_length, engine.timeout and
	// engine.max_sequences for this model.
	KeepAlive    *time.Duration `yaml:"keep_alive"`
	QueueLength  int            `yaml:"queue_length"`
	Timeout      time.Duration  `yaml:"timeout"`
	MaxSequences int            `yaml:"max_sequences"`
	// ContextOverflow overrides engine.context_overflow for this model.
	ContextOverflow string `yaml:"context_overflow"`
	// ContextShift overrides engine.context_shift for this model.
	ContextShift *bool `yaml:"context_shift"`

	// Upstream makes a models: entry an OpenAI-compatible server on the
	// network instead of a file (set id and upstream, nothing else).
	Upstream *Upstream `yaml:"upstream"`
	// Fallback sends this local model's requests to an upstream entry when
	// the device cannot serve them.
	Fallback *Fallback `yaml:"fallback"`
}

// Upstream is an OpenAI-compatible server whose model hexserve serves as
// one of its own: requests are forwarded and the replies streamed back.
type Upstream struct {
	// BaseURL is the API root, "http://gpu-box:8000/v1"; https verifies the
	// server's certificate (against ca_file when set, else the system's).
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv and APIKeyFile name where the upstream's key is: an
	// environment variable or a file (its first line). Never in the config.
	APIKeyEnv  string `yaml:"api_key_env"`
	APIKeyFile string `yaml:"api_key_file"`
	// Model is the upstream's name for the model; "" sends the entry's id.
	Model string `yaml:"model"`
	// Timeout bounds each forwarded request, stream included (unset:
	// engine.timeout); ConnectTimeout bounds connecting (unset: 10 s).
	Timeout        time.Duration `yaml:"timeout"`
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// MaxInFlight caps the requests forwarded at once (unset or 0: 64);
	// over it requests get a 503 with Retry-After.
	MaxInFlight int `yaml:"max_in_flight"`
	// CAFile is a PEM bundle of the certificate authorities to trust for
	// an https base_url instead of the system's.
	CAFile string `yaml:"ca_file"`
}

// Fallback is a local model's policy for the requests it cannot serve.
type Fallback struct {
	To   string   `yaml:"to"`   // the id of an upstream entry
	When []string `yaml:"when"` // FallbackReasons; empty: all of them
}

// FallbackReasons are the values of fallback.when: a prompt longer than the
// context, a full queue, a model that is loading or failed to load.
var FallbackReasons = []string{"context_exceeded", "queue_full", "unavailable"}

// UpstreamEntries are the models: entries that are upstreams, in order.
func (c Config) UpstreamEntries() []Model {
	var out []Model
	for _, e := range c.Models {
		if e.Upstream != nil {
			out = append(out, e)
		}
	}
	return out
}

// local are the models: entries that are files.
func (c Config) local() []Model {
	var out []Model
	for _, e := range c.Models {
		if e.Upstream == nil {
			out = append(out, e)
		}
	}
	return out
}

// reasoningParsers are model.reasoning_parser's values (apiconv's parsers,
// "none", and "" for detection).
var reasoningParsers = []string{"", "qwen3", "deepseek_r1", "none"}

// Location is the model path: Path, else its alias Bundle.
func (m Model) Location() string {
	if m.Path != "" {
		return m.Path
	}
	return m.Bundle
}

// SetLocation replaces the configured path and its alias (a command-line
// --model or --bundle).
func (m *Model) SetLocation(p string) { m.Path, m.Bundle = p, "" }

// Entries are the models to serve, each with every key resolved: the
// models: list, whose entries inherit model.libraries, model.tokenizer,
// model.perf_mode, model.adsp_library_path, model.seq_kv_mb, model.overrides and the engine's
// keep_alive, queue_length, timeout and max_sequences for keys they leave unset; or, without
// a list, model.* as a list of one. Preload is always set. An entry's source
// is its Path. Upstream entries are not among them (UpstreamEntries): a
// list of upstreams alone leaves model.* as the one local model.
func (c Config) Entries() []Model {
	list := c.local()
	several := len(list) > 0
	if !several {
		list = []Model{c.Model}
	}
	out := make([]Model, len(list))
	for i, e := range list {
		d := c.Model
		if several {
			e.Path, e.Bundle = e.Location(), ""
			if e.KeepAlive == nil {
				e.KeepAlive = d.KeepAlive
			}
			inherit(&e.QueueLength, d.QueueLength)
			inherit(&e.Timeout, d.Timeout)
			inherit(&e.ContextOverflow, d.ContextOverflow)
			inherit(&e.ContextShift, d.ContextShift)
			inherit(&e.MaxSequences, d.MaxSequences)
		}
		inherit(&e.Tokenizer, d.Tokenizer)
		inherit(&e.Libraries.Backend, d.Libraries.Backend)
		inherit(&e.Libraries.System, d.Libraries.System)
		inherit(&e.Libraries.RPCMem, d.Libraries.RPCMem)
		inherit(&e.PerfMode, d.PerfMode)
		inherit(&e.ReasoningParser, d.ReasoningParser)
		inherit(&e.ADSPLibraryPath, d.ADSPLibraryPath)
		inherit(&e.SeqKVMB, d.SeqKVMB)
		inherit(&e.ToolParser, d.ToolParser)
		inherit(&e.AllowOutsidePaths, d.AllowOutsidePaths)
		if e.Overrides == nil {
			e.Overrides = d.Overrides
		}
		if e.KeepAlive == nil {
			ka := c.Engine.KeepAlive
			e.KeepAlive = &ka
		}
		inherit(&e.QueueLength, c.Engine.QueueLength)
		inherit(&e.Timeout, c.Engine.Timeout)
		inherit(&e.ContextOverflow, c.Engine.ContextOverflow)
		inherit(&e.ContextShift, c.Engine.ContextShift)
		inherit(&e.MaxSequences, c.Engine.MaxSequences)
		if e.Preload == nil {
			on := len(list) == 1
			e.Preload = &on
		}
		out[i] = e
	}
	return out
}

func inherit[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// ToolParsers are the values of model.tool_parser: the tool-call formats
// apiconv.ToolFormats holds, by vLLM's names.
var ToolParsers = []string{"llama3_json", "hermes", "granite", "json"}

const toolParserWhat = "must be llama3_json, hermes, granite or json (unset: detected from the chat template)"

// Libraries are the QNN shared libraries. Bare names are resolved by the
// dynamic loader (LD_LIBRARY_PATH, the vendor paths on a phone).
type Libraries struct {
	Backend string `yaml:"backend"` // libQnnHtp.so
	System  string `yaml:"system"`  // libQnnSystem.so
	RPCMem  string `yaml:"rpcmem"`  // libcdsprpc.so
}

// Engine configures request admission and generation limits.
type Engine struct {
	QueueLength  int           `yaml:"queue_length"`  // requests waiting behind the active ones
	MaxSequences int           `yaml:"max_sequences"` // sequences side by side; 0: auto (from the model), 1: one request at a time
	Timeout      time.Duration `yaml:"timeout"`       // per-request generation time limit
	KVCache      KVCache       `yaml:"kv_cache"`      // the store of many sequences' KV rows
	Speculative  Speculative   `yaml:"speculative"`
	// KeepAlive unloads a model this long after its last request ended; 0
	// unloads after each request, < 0 never. A request's keep_alive (the
	// Ollama API's) overrides it for that model.
	KeepAlive time.Duration `yaml:"keep_alive"`
	// ModelMemory is the budget of the loaded models together (mapped files,
	// runtime buffers, KV cache and KV store); 0 is no limit. Over it the
	// least recently used idle model is unloaded first.
	ModelMemory ByteSize `yaml:"model_memory"`
	// ContextOverflow is what a prompt over the window gets when the
	// request does not say: "error" (a 400), "truncate_middle" or
	// "rolling" (older turns left out); "" is each API's default (error on
	// the OpenAI and Anthropic APIs, Ollama's truncate on /api/*).
	ContextOverflow string `yaml:"context_overflow"`
	// ContextShift makes generation go on past the window when the request
	// does not say (its context_shift, the Ollama API's shift): a quarter
	// of the window is freed, keeping the system prompt, the tools and the
	// newest tokens. Unset is each API's default (off on the OpenAI and
	// Anthropic APIs, on for /api/*, as Ollama's shift).
	ContextShift *bool `yaml:"context_shift"`
}

// Speculative configures speculative decoding (models whose multi-token
// graph takes past KV: chunked bundles and .pte).
type Speculative struct {
	Enabled      bool `yaml:"enabled"`       // false: decode plainly, predictions ignored
	PromptLookup bool `yaml:"prompt_lookup"` // draft from the prompt and the text so far
	MaxDraft     int  `yaml:"max_draft"`     // draft tokens per verify call; 0: the planner's choice
}

// KVCache configures the KV store: saved KV rows of finished requests,
// restored when a later prompt starts with them.
type KVCache struct {
	Memory ByteSize `yaml:"memory"` // host-memory budget; 0 turns the store off
	Dir    string   `yaml:"dir"`    // spill directory; "" keeps entries in memory only
	Disk   ByteSize `yaml:"disk"`   // budget of the files in dir
}

// Sampling holds the defaults for parameters a request leaves out.
type Sampling struct {
	Temperature       float32 `yaml:"temperature"`
	TopP              float32 `yaml:"top_p"`
	TopK              int     `yaml:"top_k"`
	MinP              float32 `yaml:"min_p"`
	RepetitionPenalty float32 `yaml:"repetition_penalty"`
	MaxTokens         int     `yaml:"max_tokens"` // 0: until the context is full
}

// Chat configures prompt rendering.
type Chat struct {
	// Date is the template's "Today Date": "today" (the server's local date)
	// or a fixed date like "26 Jul 2024".
	Date string `yaml:"date"`
}

// Responses configures the store of /v1/responses responses (store: true)
// kept for previous_response_id, retrieval and deletion.
type Responses struct {
	MaxCount int      `yaml:"max_count"` // responses kept; the least recently used go first
	MaxBytes ByteSize `yaml:"max_bytes"` // total size of the kept responses
	Dir      string   `yaml:"dir"`       // "": memory only; else one file per response, kept across restarts
}

// Structured bounds what one structured-output request (response_format,
// text.format, a forced tool call) may cost: compiling its grammar and each
// token's mask. A schema over a bound is refused with a 400 naming it.
type Structured struct {
	// CompileBudget is the work allowed for one compile, and again for each
	// token's mask, in steps (about one automaton edge or parse thread each).
	CompileBudget int64 `yaml:"compile_budget"`
	// MaxStates bounds the DFA states of one pattern (its NFA: five times).
	MaxStates int `yaml:"max_states"`
	// MaxBranches bounds the parse threads alive at once (overlapping anyOf
	// branches).
	MaxBranches int `yaml:"max_branches"`
	// Memory bounds the shared cache of compiled patterns and masks, and
	// one grammar's automaton tables.
	Memory ByteSize `yaml:"memory"`
	// MaxCompiles bounds the schemas compiled at once across all requests;
	// one that waits more than a second for its turn gets 503.
	MaxCompiles int `yaml:"max_compiles"`
}

// Log configures the logger.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Format string `yaml:"format"` // json or console
}

// Default returns the configuration used when a key is absent.
func Default() Config {
	return Config{
		Server: Server{
			Listen:             "127.0.0.1:8080",
			BodyLimit:          1 << 20,
			RelayMemory:        128 << 20, // upstream.DefaultBudget
			BodyMemory:         128 << 20, // server.DefaultBodyMemory
			ReadHeaderTimeout:  10 * time.Second,
			BodyTimeout:        30 * time.Second,
			IdleTimeout:        2 * time.Minute,
			ShutdownTimeout:    30 * time.Second,
			StreamWriteTimeout: 30 * time.Second,
		},
		Model: Model{
			Libraries: Libraries{Backend: "libQnnHtp.so", System: "libQnnSystem.so", RPCMem: "libcdsprpc.so"},
			PerfMode:  "burst",
		},
		Engine: Engine{QueueLength: 8, Timeout: 5 * time.Minute, KeepAlive: 5 * time.Minute,
			KVCache:     KVCache{Memory: 512 << 20, Disk: 2 << 30},
			Speculative: Speculative{Enabled: true, PromptLookup: true}},
		// Llama-3.2-Instruct's generation_config.json.
		Sampling:  Sampling{Temperature: 0.6, TopP: 0.9, RepetitionPenalty: 1},
		Chat:      Chat{Date: "today"},
		Responses: Responses{MaxCount: 1000, MaxBytes: 64 << 20},
		// grammar.DefaultSteps, DefaultMaxStates, DefaultMaxBranches, DefaultMemory.
		Structured: Structured{CompileBudget: 20_000_000, MaxStates: 4000, MaxBranches: 64, Memory: 64 << 20, MaxCompiles: 2},
		Log:        Log{Level: "info", Format: "json"},
	}
}

// Load reads and validates the YAML file at path over the defaults: a regular file of at most
// modelfile.MaxConfig bytes.
func Load(path string) (Config, error) {
	data, err := modelfile.ReadFile(path, modelfile.MaxConfig)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return Config{}, fmt.Errorf("%w (in %s)", err, path)
	}
	return cfg, nil
}

// Parse decodes YAML over the defaults and validates the result. Unknown keys
// are errors.
func Parse(data []byte) (Config, error) {
	cfg := Default()
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if err := checkKeys(&root, &cfg); err != nil {
		return Config{}, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	lists := []*[]string{&cfg.Server.APIKeys, &cfg.Server.CORSOrigins, &cfg.Server.AllowedHosts, &cfg.Model.Aliases}
	for i := range cfg.Models {
		lists = append(lists, &cfg.Models[i].Aliases)
	}
	for _, list := range lists {
		if len(*list) == 0 {
			*list = nil // `key: []` and an absent key mean the same
		}
	}
	if len(cfg.Server.ModelAliases) == 0 {
		cfg.Server.ModelAliases = nil
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// MergeAPIKeys adds the comma-separated keys of env (the value of
// $HEXSERVE_API_KEYS) to the configured ones, skipping blanks and duplicates.
func (c *Config) MergeAPIKeys(env string) {
	seen := make(map[string]bool)
	var keys []string
	for _, k := range append(c.Server.APIKeys, strings.Split(env, ",")...) {
		k = strings.TrimSpace(k)
		if k != "" && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	c.Server.APIKeys = keys
}

// Validate checks every value; the error names the first bad key.
func (c *Config) Validate() error {
	if err := checkFinite(reflect.ValueOf(c).Elem(), ""); err != nil {
		return err
	}
	s, m, e, p := &c.Server, &c.Model, &c.Engine, &c.Sampling
	checks := []struct {
		bad  bool
		key  string
		what string
	}{
		{!validAddr(s.Listen), "server.listen", "must be host:port"},
		{hasEmpty(s.APIKeys), "server.api_keys", "must not contain empty keys"},
		{!validOrigins(s.CORSOrigins), "server.cors_origins", `must be "*" or origins like "https://example.com"`},
		{s.BodyLimit <= 0, "server.body_limit", "must be > 0"},
		{s.RelayMemory <= 0, "server.relay_memory", "must be > 0"},
		{s.BodyMemory < s.BodyLimit, "server.body_memory", "must be >= server.body_limit"},
		{s.ReadHeaderTimeout <= 0, "server.read_header_timeout", "must be > 0"},
		{s.BodyTimeout <= 0, "server.body_timeout", "must be > 0"},
		{s.IdleTimeout <= 0, "server.idle_timeout", "must be > 0"},
		{s.ShutdownTimeout < 0, "server.shutdown_timeout", "must be >= 0"},
		{s.StreamWriteTimeout <= 0, "server.stream_write_timeout", "must be > 0"},
		{s.TLSCertFile != "" && s.TLSKeyFile == "", "server.tls_key_file", "must be set with server.tls_cert_file"},
		{s.TLSKeyFile != "" && s.TLSCertFile == "", "server.tls_cert_file", "must be set with server.tls_key_file"},
		{m.ID != "" && strings.ContainsAny(m.ID, " \t\n/"), "model.id", "must not contain spaces or slashes"},
		{hasEmpty(m.Aliases), "model.aliases", "must not contain empty ids"},
		{m.Path != "" && m.Bundle != "" && m.Path != m.Bundle, "model.bundle", "is an alias of model.path; set one of them"},
		{m.Libraries.Backend == "", "model.libraries.backend", "must be set"},
		{m.Libraries.System == "", "model.libraries.system", "must be set"},
		{!oneOf(m.PerfMode, "burst", "sustained", "balanced"), "model.perf_mode", "must be burst, sustained or balanced"},
		{!oneOf(m.ReasoningParser, reasoningParsers...), "model.reasoning_parser", "must be qwen3, deepseek_r1 or none (unset: from the chat template)"},
		{m.SeqKVMB < 0 || m.SeqKVMB > 1<<20, "model.seq_kv_mb", "must be between 0 and 1048576"},
		{m.ToolParser != "" && !slices.Contains(ToolParsers, m.ToolParser), "model.tool_parser", toolParserWhat},
		{e.QueueLength < 1, "engine.queue_length", "must be >= 1"},
		{m.MaxSequences < 0 || m.MaxSequences > 64, "model.max_sequences", "must be between 1 and 64 (unset: engine.max_sequences)"},
		{e.MaxSequences < 0 || e.MaxSequences > 64, "engine.max_sequences", "must be between 0 (auto) and 64"},
		{s.MaxLoadedModels < 0, "server.max_loaded_models", "must be >= 0 (0: 64)"},
		{e.ModelMemory < 0, "engine.model_memory", "must be >= 0 (0: 64)"},
		{len(c.local()) > 0 && m.Location() != "", "model.path", "set either model.path (one model) or models (several), not both"},
		{e.Timeout <= 0, "engine.timeout", "must be > 0"},
		{e.Speculative.MaxDraft < 0, "engine.speculative.max_draft", "must be >= 0"},
		{e.KVCache.Memory < 0, "engine.kv_cache.memory", "must be >= 0 (0 turns the store off)"},
		{e.KVCache.Dir != "" && e.KVCache.Memory == 0, "engine.kv_cache.dir", "needs engine.kv_cache.memory > 0"},
		{e.KVCache.Disk <= 0, "engine.kv_cache.disk", "must be > 0"},
		{!validOverflow(e.ContextOverflow), "engine.context_overflow", overflowValues},
		{!validOverflow(m.ContextOverflow), "model.context_overflow", overflowValues},
		{p.Temperature < 0 || p.Temperature > 2, "sampling.temperature", "must be in [0, 2]"},
		{p.TopP < 0 || p.TopP > 1, "sampling.top_p", "must be in [0, 1]"},
		{p.TopK < 0, "sampling.top_k", "must be >= 0"},
		{p.MinP < 0 || p.MinP > 1, "sampling.min_p", "must be in [0, 1]"},
		{p.RepetitionPenalty < 0, "sampling.repetition_penalty", "must be >= 0"},
		{p.MaxTokens < 0, "sampling.max_tokens", "must be >= 0"},
		{!validDate(c.Chat.Date), "chat.date", `must be "today" or a date like "26 Jul 2024"`},
		{c.Responses.MaxCount < 1, "responses.max_count", "must be >= 1"},
		{c.Responses.MaxBytes < 1, "responses.max_bytes", "must be > 0"},
		{c.Structured.CompileBudget < 1000, "structured.compile_budget", "must be >= 1000"},
		{c.Structured.MaxCompiles < 1, "structured.max_compiles", "must be >= 1"},
		{c.Structured.MaxStates < 16, "structured.max_states", "must be >= 16"},
		{c.Structured.MaxBranches < 1, "structured.max_branches", "must be >= 1"},
		{c.Structured.Memory < 1<<20, "structured.memory", "must be >= 1MiB"},
		{!oneOf(c.Log.Level, "debug", "info", "warn", "error"), "log.level", "must be debug, info, warn or error"},
		{!oneOf(c.Log.Format, "json", "console"), "log.format", "must be json or console"},
	}
	for _, ch := range checks {
		if ch.bad {
			return fmt.Errorf("config: %s: %s", ch.key, ch.what)
		}
	}
	if err := checkModelAliases(s.ModelAliases); err != nil {
		return err
	}
	if m.Overrides != nil { // the bundle kind validates its own section
		if err := m.Overrides.Validate(); err != nil {
			return fmt.Errorf("config: model.overrides.%w", err)
		}
	}
	return c.validateModels()
}

// validateModels checks the models: entries: each names a source, ids and
// aliases are unique across entries (an entry without id derives its own at
// load; the check covers what the config says).
func (c *Config) validateModels() error {
	seen := map[string]string{} // id or alias → the key that claims it
	for i, e := range c.Models {
		key := fmt.Sprintf("models[%d]", i)
		if e.Upstream != nil {
			if err := checkUpstream(e, key); err != nil {
				return err
			}
			if err := claim(seen, e, key); err != nil {
				return err
			}
			continue
		}
		checks := []struct {
			bad       bool
			key, what string
		}{
			{e.Location() == "", key + ".path", "must be set"},
			{e.Path != "" && e.Bundle != "" && e.Path != e.Bundle, key + ".bundle", "is an alias of path; set one of them"},
			{len(c.local()) > 1 && e.ID == "", key + ".id", "must be set when several models are configured"},
			{strings.ContainsAny(e.ID, " \t\n/"), key + ".id", "must not contain spaces or slashes"},
			{hasEmpty(e.Aliases), key + ".aliases", "must not contain empty ids"},
			{e.PerfMode != "" && !oneOf(e.PerfMode, "burst", "sustained", "balanced"), key + ".perf_mode", "must be burst, sustained or balanced"},
			{!oneOf(e.ReasoningParser, reasoningParsers...), key + ".reasoning_parser", "must be qwen3, deepseek_r1 or none (unset: model.reasoning_parser)"},
			{e.SeqKVMB < 0 || e.SeqKVMB > 1<<20, key + ".seq_kv_mb", "must be between 0 and 1048576 (unset: model.seq_kv_mb)"},
			{e.ToolParser != "" && !slices.Contains(ToolParsers, e.ToolParser), key + ".tool_parser", toolParserWhat},
			{e.QueueLength < 0, key + ".queue_length", "must be >= 1 (unset: engine.queue_length)"},
			{e.Timeout < 0, key + ".timeout", "must be > 0 (unset: engine.timeout)"},
			{!validOverflow(e.ContextOverflow), key + ".context_overflow", overflowValues},
			{e.MaxSequences < 0 || e.MaxSequences > 64, key + ".max_sequences", "must be between 1 and 64 (unset: engine.max_sequences)"},
		}
		for _, ch := range checks {
			if ch.bad {
				return fmt.Errorf("config: %s: %s", ch.key, ch.what)
			}
		}
		if e.Overrides != nil {
			if err := e.Overrides.Validate(); err != nil {
				return fmt.Errorf("config: %s.overrides.%w", key, err)
			}
		}
		if err := claim(seen, e, key); err != nil {
			return err
		}
	}
	if err := c.checkFallback(c.Model, "model"); err != nil {
		return err
	}
	for i, e := range c.Models {
		if err := c.checkFallback(e, fmt.Sprintf("models[%d]", i)); err != nil {
			return err
		}
	}
	if len(c.local()) > 1 { // every id is set: the alias targets can be checked now
		for _, pat := range slices.Sorted(maps.Keys(c.Server.ModelAliases)) {
			if t := c.Server.ModelAliases[pat]; seen[t] == "" {
				return fmt.Errorf("config: server.model_aliases.%s: %q is not the id or an alias of one of models", pat, t)
			}
		}
	}
	return nil
}

// claim records e's id and aliases in seen, refusing one already claimed.
func claim(seen map[string]string, e Model, key string) error {
	for j, id := range append([]string{e.ID}, e.Aliases...) {
		name := key + ".id"
		if j > 0 {
			name = fmt.Sprintf("%s.aliases[%d]", key, j-1)
		}
		if id == "" {
			continue
		}
		if prev, ok := seen[id]; ok {
			return fmt.Errorf("config: %s: %q is already %s", name, id, prev)
		}
		seen[id] = name
	}
	return nil
}

// checkUpstream validates an upstream entry: an id, an http(s) base_url
// without credentials, at most one key source, and no file-model keys.
func checkUpstream(e Model, key string) error {
	u := e.Upstream
	base, err := url.Parse(u.BaseURL)
	checks := []struct {
		bad       bool
		key, what string
	}{
		{e.ID == "", key + ".id", "must be set for an upstream"},
		{strings.ContainsAny(e.ID, " \t\n/"), key + ".id", "must not contain spaces or slashes"},
		{hasEmpty(e.Aliases), key + ".aliases", "must not contain empty ids"},
		{e.Location() != "", key + ".path", "must not be set with upstream"},
		{e.Fallback != nil, key + ".fallback", "is for local models, not upstreams"},
		{err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "", key + ".upstream.base_url",
			`must be an http or https URL like "http://gpu-box:8000/v1"`},
		{err == nil && base.User != nil, key + ".upstream.base_url", "must not hold credentials; use api_key_env or api_key_file"},
		{u.APIKeyEnv != "" && u.APIKeyFile != "", key + ".upstream.api_key_file", "set api_key_env or api_key_file, not both"},
		{u.Timeout < 0, key + ".upstream.timeout", "must be > 0 (unset: engine.timeout)"},
		{u.ConnectTimeout < 0, key + ".upstream.connect_timeout", "must be > 0 (unset: 10s)"},
		{u.MaxInFlight < 0, key + ".upstream.max_in_flight", "must be >= 0 (0: 64)"},
	}
	for _, ch := range checks {
		if ch.bad {
			return fmt.Errorf("config: %s: %s", ch.key, ch.what)
		}
	}
	return nil
}

// checkFallback validates a local model's fallback: it names an upstream
// entry, known reasons, and the model has an id to match requests by.
func (c Config) checkFallback(e Model, key string) error {
	f := e.Fallback
	if f == nil || e.Upstream != nil {
		return nil
	}
	found := false
	for _, u := range c.UpstreamEntries() {
		found = found || u.ID == f.To
	}
	if !found {
		return fmt.Errorf("config: %s.fallback.to: %q is not the id of an upstream entry of models", key, f.To)
	}
	if e.ID == "" {
		return fmt.Errorf("config: %s.id: must be set with a fallback", key)
	}
	for i, w := range f.When {
		if !oneOf(w, FallbackReasons...) {
			return fmt.Errorf("config: %s.fallback.when[%d]: must be one of %s", key, i, strings.Join(FallbackReasons, ", "))
		}
	}
	return nil
}

// checkFinite refuses NaN and ±Inf in any float of v (YAML spells them
// .nan and .inf): every range check passes NaN, and a bad default would
// then refuse every request as if the client had sent it. The error names
// the key by its YAML path.
func checkFinite(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("config: %s: must be a finite number, not %v", path, f)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			return checkFinite(v.Elem(), path)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			if err := checkFinite(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			if path != "" {
				name = path + "." + name
			}
			if err := checkFinite(v.Field(i), name); err != nil {
				return err
			}
		}
	}
	return nil
}

// DateString is the chat template's date for the configured Date at time now.
func (c Chat) DateString(now time.Time) string {
	if c.Date == "today" || c.Date == "" {
		return now.Format("02 Jan 2006")
	}
	return c.Date
}

// IsLoopback reports whether listen binds only loopback addresses.
func IsLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ModelID derives a served model id from a manifest model name: lower case,
// runs of other characters than [a-z0-9._-] become one '-'.
func ModelID(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(strings.TrimSpace(name)) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimRight(b.String(), "-")
}

// checkModelAliases checks that each pattern is a valid path.Match glob and
// each target a model id.
func checkModelAliases(aliases map[string]string) error {
	for _, pat := range slices.Sorted(maps.Keys(aliases)) {
		target := aliases[pat]
		if _, err := path.Match(pat, ""); err != nil || pat == "" {
			return fmt.Errorf("config: server.model_aliases: %q is not a valid glob (path.Match syntax: *, ?, [a-z], \\)", pat)
		}
		if target == "" || strings.ContainsAny(target, " \t\n/") {
			return fmt.Errorf("config: server.model_aliases.%s: %q must be a served model id (no spaces or slashes)", pat, target)
		}
	}
	return nil
}

// CheckModelAliases checks, once the served id is known, that every
// server.model_aliases target names the served model: id or one of aliases.
func (s Server) CheckModelAliases(id string, aliases []string) error {
	for _, pat := range slices.Sorted(maps.Keys(s.ModelAliases)) {
		if t := s.ModelAliases[pat]; t != id && !slices.Contains(aliases, t) {
			return fmt.Errorf("config: server.model_aliases.%s: %q is not the served model %q (nor one of model.aliases)", pat, t, id)
		}
	}
	return nil
}

func validAddr(a string) bool {
	_, port, err := net.SplitHostPort(a)
	return err == nil && port != ""
}

func validOrigins(origins []string) bool {
	for _, o := range origins {
		if o == "*" {
			continue
		}
		scheme, host, ok := strings.Cut(o, "://")
		if !ok || (scheme != "http" && scheme != "https") || host == "" || strings.ContainsAny(host, "/ ") {
			return false
		}
	}
	return true
}

func validDate(d string) bool {
	if d == "today" {
		return true
	}
	_, err := time.Parse("2 Jan 2006", d)
	return err == nil
}

func hasEmpty(list []string) bool {
	for _, s := range list {
		if strings.TrimSpace(s) == "" {
			return true
		}
	}
	return false
}

func oneOf(s string, allowed ...string) bool {
	for _, a := range allowed {
		if s == a {
			return true
		}
	}
	return false
}

const overflowValues = "must be error, truncate_middle or rolling"

// validOverflow reports whether s is a context_overflow policy or unset.
func validOverflow(s string) bool { return s == "" || oneOf(s, "error", "truncate_middle", "rolling") }
