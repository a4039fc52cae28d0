package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hexserve/hexserve/hexagon/qhexrt/bundle"
	"github.com/hexserve/hexserve/internal/rope"
)

func TestParseGood(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want func(*Config)
	}{
		{"empty", "", func(*Config) {}},
		{"listen and keys", "server:\n  listen: 0.0.0.0:9000\n  api_keys: [a, b]\n", func(c *Config) {
			c.Server.Listen = "0.0.0.0:9000"
			c.Server.APIKeys = []string{"a", "b"}
		}},
		{"body limit units", "server:\n  body_limit: 2MiB\n", func(c *Config) { c.Server.BodyLimit = 2 << 20 }},
		{"body limit int", "server:\n  body_limit: 4096\n", func(c *Config) { c.Server.BodyLimit = 4096 }},
		{"durations", "server:\n  idle_timeout: 90s\nengine:\n  timeout: 1m30s\n  queue_length: 1\n", func(c *Config) {
			c.Server.IdleTimeout = 90 * time.Second
			c.Engine.Timeout = 90 * time.Second
			c.Engine.QueueLength = 1
		}},
		{"kv cache", "engine:\n  kv_cache:\n    memory: 64MiB\n    dir: /var/cache/hexserve\n    disk: 1GiB\n", func(c *Config) {
			c.Engine.KVCache = KVCache{Memory: 64 << 20, Dir: "/var/cache/hexserve", Disk: 1 << 30}
		}},
		{"kv cache off", "engine:\n  kv_cache:\n    memory: 0\n", func(c *Config) { c.Engine.KVCache.Memory = 0 }},
		{"cors", "server:\n  cors_origins: ['*', 'http://localhost:3000']\n", func(c *Config) {
			c.Server.CORSOrigins = []string{"*", "http://localhost:3000"}
		}},
		{"model", "model:\n  bundle: build/models/tiny\n  id: tiny\n  aliases: [gpt-4o]\n  perf_mode: sustained\n  libraries:\n    backend: /x/libQnnHtp.so\n", func(c *Config) {
			c.Model.Bundle = "build/models/tiny"
			c.Model.ID = "tiny"
			c.Model.Aliases = []string{"gpt-4o"}
			c.Model.PerfMode = "sustained"
			c.Model.Libraries.Backend = "/x/libQnnHtp.so"
		}},
		{"overrides", "model:\n  overrides:\n    contract: chunked\n    mask: u16\n    eos_token_ids: [1, 2]\n    tensors: {x: input}\n    rope_scaling: {rope_type: llama3, factor: 32}\n", func(c *Config) {
			contract, mask := "chunked", "u16"
			c.Model.Overrides = &bundle.Hexserve{Contract: &contract, Mask: &mask, EOSTokenIDs: []int{1, 2},
				Tensors: &bundle.Tensors{X: "input"}, RopeScaling: &rope.Scaling{Type: "llama3", Factor: 32}}
		}},
		{"sampling", "sampling:\n  temperature: 0\n  top_k: 40\n  max_tokens: 256\n", func(c *Config) {
			c.Sampling.Temperature = 0
			c.Sampling.TopK = 40
			c.Sampling.MaxTokens = 256
		}},
		{"stream and tls", "server:\n  stream_write_timeout: 5s\n  tls_cert_file: c.pem\n  tls_key_file: k.pem\n", func(c *Config) {
			c.Server.StreamWriteTimeout = 5 * time.Second
			c.Server.TLSCertFile, c.Server.TLSKeyFile = "c.pem", "k.pem"
		}},
		{"fixed date", "chat:\n  date: 26 Jul 2024\n", func(c *Config) { c.Chat.Date = "26 Jul 2024" }},
		{"log", "log:\n  level: debug\n  format: console\n", func(c *Config) { c.Log = Log{Level: "debug", Format: "console"} }},
		{"responses", "responses:\n  max_count: 10\n  max_bytes: 1MiB\n  dir: /var/lib/hexserve/responses\n", func(c *Config) {
			c.Responses = Responses{MaxCount: 10, MaxBytes: 1 << 20, Dir: "/var/lib/hexserve/responses"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := Default()
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestParseBad(t *testing.T) {
	tests := []struct{ yaml, wantErr string }{
		{"bogus: 1\n", "config: bogus: unknown key (line 1)"},
		{"server:\n  listen: x\n  bodylimit: 3\n", "config: server.bodylimit: unknown key (line 3)"},
		{"model:\n  overrides:\n    contrat: x\n", "config: model.overrides.contrat: unknown key"},
		{"server:\n  body_limit: 0\n", "config: server.body_limit: must be > 0"},
		{"server:\n  body_limit: lots\n", "config: server.body_limit:"},
		{"server:\n  listen: nonsense\n", "config: server.listen: must be host:port"},
		{"server:\n  idle_timeout: 5\n", "config: server.idle_timeout:"},
		{"server:\n  api_keys: ['']\n", "config: server.api_keys: must not contain empty keys"},
		{"server:\n  cors_origins: [example.com]\n", "config: server.cors_origins:"},
		{"server:\n  model_aliases: {\"claude-[\": x}\n", "config: server.model_aliases: \"claude-[\" is not a valid glob"},
		{"server:\n  model_aliases: {\"claude-*\": \"\"}\n", "config: server.model_aliases.claude-*: \"\" must be a served model id"},
		{"server:\n  model_aliases: [claude]\n", "config: server.model_aliases:"},
		{"engine:\n  queue_length: 0\n", "config: engine.queue_length: must be >= 1"},
		{"engine:\n  max_sequences: 65\n", "config: engine.max_sequences: must be between 0 (auto) and 64"},
		{"models:\n  - {path: /m, max_sequences: -1}\n", "config: models[0].max_sequences: must be between 1 and 64 (unset: engine.max_sequences)"},
		{"engine:\n  kv_cache:\n    memory: -1\n", "config: engine.kv_cache.memory: must be >= 0"},
		{"engine:\n  kv_cache:\n    memory: lots\n", "config: engine.kv_cache.memory:"},
		{"engine:\n  kv_cache:\n    memory: 0\n    dir: /tmp/kv\n", "config: engine.kv_cache.dir: needs engine.kv_cache.memory > 0"},
		{"engine:\n  kv_cache:\n    disk: 0\n", "config: engine.kv_cache.disk: must be > 0"},
		{"engine:\n  kv_cache:\n    size: 1\n", "config: engine.kv_cache.size: unknown key"},
		{"engine:\n  queue_length: many\n", "config: engine.queue_length:"},
		{"engine:\n  timeout: 0s\n", "config: engine.timeout: must be > 0"},
		{"model:\n  perf_mode: turbo\n", "config: model.perf_mode: must be burst, sustained or balanced"},
		{"engine:\n  context_overflow: truncate\n", "config: engine.context_overflow: must be error, truncate_middle or rolling"},
		{"models:\n  - {path: a, context_overflow: middle}\n", "config: models[0].context_overflow: must be error"},
		{"model:\n  overrides:\n    mask: bits\n", "config: model.overrides.mask: must be additive or u16"},
		{"model:\n  overrides:\n    contract: eager\n", "config: model.overrides.contract:"},
		{"model:\n  overrides:\n    n_heads: 0\n", "config: model.overrides.n_heads: must be > 0"},
		{"model:\n  overrides:\n    tensors: {q: x}\n", "config: model.overrides.tensors.q: unknown key"},
		{"sampling:\n  temperature: 3\n", "config: sampling.temperature: must be in [0, 2]"},
		{"sampling:\n  top_p: 1.5\n", "config: sampling.top_p:"},
		{"chat:\n  date: tomorrow\n", "config: chat.date:"},
		{"log:\n  level: loud\n", "config: log.level:"},
		{"responses:\n  max_count: 0\n", "config: responses.max_count: must be >= 1"},
		{"responses:\n  max_bytes: 0\n", "config: responses.max_bytes: must be > 0"},
		{"responses:\n  maxcount: 3\n", "config: responses.maxcount: unknown key"},
		{"log:\n  format: xml\n", "config: log.format:"},
		{"server: [1, 2]\n", "config: server:"},
		{"sampling:\n  temperature: .nan\n", "config: sampling.temperature: must be a finite number"},
		{"sampling:\n  top_p: .NaN\n", "config: sampling.top_p: must be a finite number"},
		{"sampling:\n  min_p: -.inf\n", "config: sampling.min_p: must be a finite number"},
		{"sampling:\n  repetition_penalty: .inf\n", "config: sampling.repetition_penalty: must be a finite number"},
		{"model:\n  overrides:\n    rms_eps: .nan\n", "config: model.overrides.rms_eps: must be a finite number"},
		{"model:\n  overrides:\n    rope_scaling: {factor: .inf}\n", "config: model.overrides.rope_scaling.factor: must be a finite number"},
		{"server:\n  stream_write_timeout: 0s\n", "config: server.stream_write_timeout: must be > 0"},
		{"server:\n  tls_cert_file: c.pem\n", "config: server.tls_key_file: must be set with server.tls_cert_file"},
		{"server:\n  tls_key_file: k.pem\n", "config: server.tls_cert_file: must be set with server.tls_key_file"},
		{"server:\n  listen: [\n", "config: yaml:"},
		{"models:\n  - {path: a, id: a}\n  - {path: b, idd: b}\n", "config: models[1].idd: unknown key"},
		{"models:\n  - {id: a}\n", "config: models[0].path: must be set"},
		{"models:\n  - {path: a, id: a}\n  - {path: b}\n", "config: models[1].id: must be set when several models"},
		{"models:\n  - {path: a, id: a}\n  - {path: b, id: b, aliases: [a]}\n", `config: models[1].aliases[0]: "a" is already models[0].id`},
		{"models:\n  - {path: a, id: x/y}\n", "config: models[0].id: must not contain"},
		{"models:\n  - {path: a, perf_mode: turbo}\n", "config: models[0].perf_mode:"},
		{"model:\n  tool_parser: qwen\n", "config: model.tool_parser: must be llama3_json, hermes, granite or json"},
		{"models:\n  - {path: a, tool_parser: pythonic}\n", "config: models[0].tool_parser: must be llama3_json"},
		{"model:\n  reasoning_parser: think\n", "config: model.reasoning_parser: must be qwen3, deepseek_r1 or none"},
		{"models:\n  - {path: a, reasoning_parser: r1}\n", "config: models[0].reasoning_parser:"},
		{"models:\n  - {path: a, keep_alive: soon}\n", "config: models[0].keep_alive:"},
		{"model:\n  path: a\nmodels:\n  - {path: b}\n", "config: model.path: set either model.path"},
		{"server:\n  max_loaded_models: -1\n", "config: server.max_loaded_models: must be >= 0"},
		{"engine:\n  model_memory: -1\n", "config: engine.model_memory: must be >= 0"},
		{"server:\n  model_aliases: {\"claude-*\": c}\nmodels:\n  - {path: a, id: a}\n  - {path: b, id: b}\n", `config: server.model_aliases.claude-*: "c" is not the id or an alias of one of models`},
		{"models:\n  - {upstream: {base_url: 'http://h/v1'}}\n", "config: models[0].id: must be set for an upstream"},
		{"models:\n  - {id: u, upstream: {base_url: 'ftp://h/v1'}}\n", "config: models[0].upstream.base_url: must be an http or https URL"},
		{"models:\n  - {id: u, upstream: {base_url: 'https://user:pw@h/v1'}}\n", "config: models[0].upstream.base_url: must not hold credentials"},
		{"models:\n  - {id: u, upstream: {base_url: 'http://h/v1', api_key: sk-1}}\n", "config: models[0].upstream.api_key: unknown key"},
		{"models:\n  - {id: u, upstream: {base_url: 'http://h/v1', api_key_env: K, api_key_file: f}}\n", "config: models[0].upstream.api_key_file: set api_key_env or api_key_file"},
		{"models:\n  - {id: u, path: a, upstream: {base_url: 'http://h/v1'}}\n", "config: models[0].path: must not be set with upstream"},
		{"models:\n  - {id: u, upstream: {base_url: 'http://h/v1', timeout: -1s}}\n", "config: models[0].upstream.timeout: must be > 0"},
		{"model:\n  id: m\n  fallback: {to: nowhere}\n", `config: model.fallback.to: "nowhere" is not the id of an upstream entry`},
		{"model:\n  fallback: {to: u}\nmodels:\n  - {id: u, upstream: {base_url: 'http://h/v1'}}\n", "config: model.id: must be set with a fallback"},
		{"model:\n  id: m\n  fallback: {to: u, when: [always]}\nmodels:\n  - {id: u, upstream: {base_url: 'http://h/v1'}}\n", "config: model.fallback.when[0]: must be one of"},
		{"model:\n  id: u\nmodels:\n  - {path: a, id: a}\n  - {id: a, upstream: {base_url: 'http://h/v1'}}\n", `config: models[1].id: "a" is already models[0].id`},
	}
	for _, tt := range tests {
		t.Run(tt.wantErr, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
				t.Fatalf("Parse(%q) error = %v, want prefix %q", tt.yaml, err, tt.wantErr)
			}
		})
	}
}

// TestEntries: model.* as a list of one, and models: entries inheriting the
// defaults for what they leave unset.
func TestEntries(t *testing.T) {
	seqs, err := Parse([]byte("engine:\n  max_sequences: 6\nmodels:\n  - {path: /m/a, id: a, max_sequences: 12}\n  - {path: /m/b, id: b}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if e := seqs.Entries(); e[0].MaxSequences != 12 || e[1].MaxSequences != 6 || Default().Engine.MaxSequences != 0 {
		t.Errorf("max_sequences: entries %d, %d (want 12, 6), default %d (want 0: auto)", e[0].MaxSequences, e[1].MaxSequences, Default().Engine.MaxSequences)
	}
	min := func(n time.Duration) *time.Duration { n *= time.Minute; return &n }
	single, err := Parse([]byte("model:\n  path: /m/one\n  id: one\nengine:\n  keep_alive: 2m\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := single.Entries()
	if len(got) != 1 || got[0].Path != "/m/one" || got[0].ID != "one" || !*got[0].Preload ||
		*got[0].KeepAlive != 2*time.Minute || got[0].QueueLength != 8 || got[0].Libraries.Backend != "libQnnHtp.so" {
		t.Fatalf("single model entries = %+v", got)
	}
	multi, err := Parse([]byte(`model:
  libraries: {backend: /q/libQnnHtp.so}
  tokenizer: /t.json
  timeout: 1m
  tool_parser: json
  reasoning_parser: none
engine:
  context_overflow: rolling
  context_shift: true
models:
  - {path: /m/a.pte, id: a, aliases: [x], preload: true, queue_length: 2}
  - {bundle: /m/b, id: b, tokenizer: /b.json, keep_alive: 0s, perf_mode: balanced, tool_parser: hermes, context_overflow: truncate_middle, reasoning_parser: qwen3, context_shift: false}
`))
	if err != nil {
		t.Fatal(err)
	}
	got = multi.Entries()
	want := []struct {
		path, tok, backend, perf, reasoning string
		preload                             bool
		keep                                *time.Duration
		queue                               int
		timeout                             time.Duration
		overflow                            string
		shift                               bool
	}{
		{"/m/a.pte", "/t.json", "/q/libQnnHtp.so", "burst", "none", true, min(5), 2, time.Minute, "rolling", true},
		{"/m/b", "/b.json", "/q/libQnnHtp.so", "balanced", "qwen3", false, min(0), 8, time.Minute, "truncate_middle", false},
	}
	for i, parser := range []string{"json", "hermes"} { // inherited, then the entry's own
		if got[i].ToolParser != parser {
			t.Errorf("entry %d tool_parser %q, want %q", i, got[i].ToolParser, parser)
		}
	}
	for i, w := range want {
		e := got[i]
		if e.Path != w.path || e.Bundle != "" || e.Tokenizer != w.tok || e.Libraries.Backend != w.backend ||
			e.Libraries.System != "libQnnSystem.so" || e.PerfMode != w.perf || e.ReasoningParser != w.reasoning || *e.Preload != w.preload ||
			*e.KeepAlive != *w.keep || e.QueueLength != w.queue || e.Timeout != w.timeout || e.ContextOverflow != w.overflow ||
			e.ContextShift == nil || *e.ContextShift != w.shift {
			t.Errorf("entry %d = %+v (keep_alive %v), want %+v", i, e, *e.KeepAlive, w)
		}
	}
}

// TestUpstreamEntries: upstream entries are not Entries; with model.path
// they leave model.* the one local model, with its fallback.
func TestUpstreamEntries(t *testing.T) {
	cfg, err := Parse([]byte(`model:
  path: /m/tiny
  id: tiny
  fallback: {to: big, when: [queue_full]}
models:
  - id: big
    aliases: [llama-70b]
    upstream: {base_url: "https://gpu:8000/v1", api_key_env: UPSTREAM_KEY, model: meta/llama-70b, timeout: 30s, max_in_flight: 4}
`))
	if err != nil {
		t.Fatal(err)
	}
	local, ups := cfg.Entries(), cfg.UpstreamEntries()
	if len(local) != 1 || local[0].Path != "/m/tiny" || local[0].Fallback == nil || local[0].Fallback.To != "big" {
		t.Errorf("Entries = %+v", local)
	}
	if len(ups) != 1 || ups[0].ID != "big" || ups[0].Upstream.Model != "meta/llama-70b" || ups[0].Upstream.Timeout != 30*time.Second ||
		ups[0].Upstream.MaxInFlight != 4 || ups[0].Upstream.APIKeyEnv != "UPSTREAM_KEY" {
		t.Errorf("UpstreamEntries = %+v", ups)
	}
}

// The shipped example must parse and equal the defaults: it documents them.
func TestExampleIsDefault(t *testing.T) {
	cfg, err := Load(filepath.Join("..", "config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := Default(); !reflect.DeepEqual(cfg, want) {
		t.Errorf("config.example.yaml differs from Default():\n got  %+v\n want %+v", cfg, want)
	}
}

// TestShippedConfigs parses the configs that make run and Dockerfile.hostsim use.
func TestShippedConfigs(t *testing.T) {
	for _, name := range []string{"dev.yaml", "docker.yaml"} {
		if _, err := Load(filepath.Join("..", "configs", name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if err == nil || !os.IsNotExist(errUnwrapAll(err)) {
		t.Fatalf("err = %v", err)
	}
}

func errUnwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestMergeAPIKeys(t *testing.T) {
	c := Default()
	c.Server.APIKeys = []string{"a"}
	c.MergeAPIKeys(" b, ,a,c ")
	if want := []string{"a", "b", "c"}; !reflect.DeepEqual(c.Server.APIKeys, want) {
		t.Errorf("keys = %q, want %q", c.Server.APIKeys, want)
	}
}

func TestWebUIOn(t *testing.T) {
	on, off := true, false
	tests := []struct {
		name   string
		listen string
		keys   []string
		set    *bool
		want   bool
	}{
		{"loopback", "127.0.0.1:8080", nil, nil, true},
		{"beyond loopback without keys", "0.0.0.0:8080", nil, nil, false},
		{"beyond loopback with keys", "0.0.0.0:8080", []string{"k"}, nil, true},
		{"loopback, set off", "127.0.0.1:8080", nil, &off, false},
		{"beyond loopback without keys, set on", ":8080", nil, &on, true},
	}
	for _, tt := range tests {
		s := Server{Listen: tt.listen, APIKeys: tt.keys, WebUI: tt.set}
		if got := s.WebUIOn(); got != tt.want {
			t.Errorf("%s: WebUIOn() = %v, want %v", tt.name, got, tt.want)
		}
	}
	cfg, err := Parse([]byte("server:\n  web_ui: false\n"))
	if err != nil || cfg.Server.WebUI == nil || *cfg.Server.WebUI {
		t.Errorf("web_ui: false parsed as %v, %v", cfg.Server.WebUI, err)
	}
	if _, err := Parse([]byte("server:\n  web_ui: maybe\n")); err == nil || !strings.Contains(err.Error(), "server.web_ui") {
		t.Errorf("web_ui: maybe: err = %v", err)
	}
}

func TestHelpers(t *testing.T) {
	for in, want := range map[string]string{
		"Llama-3.2-1B-Instruct": "llama-3.2-1b-instruct",
		"llama 3.2 1B (w8a16)":  "llama-3.2-1b-w8a16",
		"tinyllama-public":      "tinyllama-public",
	} {
		if got := ModelID(in); got != want {
			t.Errorf("ModelID(%q) = %q, want %q", in, got, want)
		}
	}
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:1": true, "[::1]:80": true,
		"0.0.0.0:8080": false, ":8080": false, "192.168.1.2:80": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v", addr, got)
		}
	}
	now := time.Date(2026, 11, 5, 12, 0, 0, 0, time.Local)
	if got := (Chat{Date: "today"}).DateString(now); got != "05 Nov 2026" {
		t.Errorf("today = %q", got)
	}
	if got := (Chat{Date: "26 Jul 2024"}).DateString(now); got != "26 Jul 2024" {
		t.Errorf("fixed = %q", got)
	}
}

func TestModelPathAlias(t *testing.T) {
	for _, tc := range []struct {
		yaml, want, err string
	}{
		{"model:\n  path: /m.pte\n", "/m.pte", ""},
		{"model:\n  bundle: /b\n", "/b", ""},
		{"model:\n  path: /b\n  bundle: /b\n", "/b", ""},
		{"model:\n  path: /m.pte\n  bundle: /b\n", "", "model.bundle: is an alias of model.path"},
	} {
		c, err := Parse([]byte(tc.yaml))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.err)
		case tc.err == "" && (err != nil || c.Model.Location() != tc.want):
			t.Errorf("%q: location %q, error %v; want %q", tc.yaml, c.Model.Location(), err, tc.want)
		}
	}
}

func TestModelAliases(t *testing.T) {
	cfg, err := Parse([]byte("server:\n  model_aliases: {\"claude-*\": tiny, \"gpt-?\": tiny-alias}\nmodel:\n  aliases: [tiny-alias]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Server.ModelAliases; len(got) != 2 || got["claude-*"] != "tiny" {
		t.Fatalf("model_aliases %v", got)
	}
	if err := cfg.Server.CheckModelAliases("tiny", cfg.Model.Aliases); err != nil {
		t.Fatal(err)
	}
	err = cfg.Server.CheckModelAliases("other", nil)
	if err == nil || !strings.Contains(err.Error(), `server.model_aliases.claude-*: "tiny" is not the served model "other"`) {
		t.Fatalf("unserved target: %v", err)
	}
}

// TestHosts: the Host check is on for a loopback listener or with
// allowed_hosts, off (nil) otherwise.
func TestHosts(t *testing.T) {
	for _, tc := range []struct {
		listen  string
		allowed []string
		want    []string // nil: any Host
	}{
		{"127.0.0.1:8080", nil, []string{}},
		{"[::1]:8080", nil, []string{}},
		{"localhost:8080", []string{"proxy.lan"}, []string{"proxy.lan"}},
		{"0.0.0.0:8080", nil, nil},
		{"0.0.0.0:8080", []string{"phone.lan"}, []string{"phone.lan"}},
	} {
		got := Server{Listen: tc.listen, AllowedHosts: tc.allowed}.Hosts()
		if (got == nil) != (tc.want == nil) || strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s %v: %#v, want %#v", tc.listen, tc.allowed, got, tc.want)
		}
	}
}
