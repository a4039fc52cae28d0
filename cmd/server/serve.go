package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/grammar"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/kvstore"
	"github.com/hexserve/hexserve/internal/modelfile"
	"github.com/hexserve/hexserve/openai"
	"github.com/hexserve/hexserve/respstore"
	"github.com/hexserve/hexserve/server"
	"github.com/hexserve/hexserve/tokenizer"
	"github.com/hexserve/hexserve/upstream"
)

// serveMain implements `hexserve serve`.
func serveMain(args []string, stdout, stderr io.Writer) int {
	cfg, code := serveConfig(args, stdout, stderr, os.Getenv)
	if cfg == nil {
		return code
	}
	log := newLogger(cfg.Log, stderr)
	if dir := useHostsim(cfg); dir != "" {
		log.Info().Str("dir", dir).Msg("model.libraries not set: using hostsim's libraries (the CPU stand-in for the NPU) built by make")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, *cfg, log, nil, nil); err != nil {
		log.Error().Err(libraryHint(err, *cfg)).Msg("hexserve stopped")
		return 1
	}
	return 0
}

// serveConfig parses the flags and the config file, applies the flag and
// environment overrides and validates. nil means exit with the code.
func serveConfig(args []string, stdout, stderr io.Writer, getenv func(string) string) (*config.Config, int) {
	fs := newFlags("serve", stdout, stderr)
	path := fs.String("config", "", "YAML config `file` (see config.example.yaml); absent keys take their defaults")
	addr := fs.String("addr", "", "listen `address` host:port (overrides server.listen)")
	modelPath := fs.String("model", "", "model `path`: QHexRT bundle dir, arch folder or manifest, a .pte, or a folder holding one .pte (replaces model.path and models)")
	fs.StringVar(modelPath, "bundle", "", "alias of --model")
	queue := fs.Int("queue", 0, "requests that may wait for a free sequence slot (overrides engine.queue_length)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: hexserve serve [flags]\n\nServes the OpenAI-compatible API. Environment: HEXSERVE_API_KEYS adds\ncomma-separated API keys to server.api_keys.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseNoArgs(fs, args, stderr); !ok {
		return nil, code
	}
	cfg := config.Default()
	if *path != "" {
		var err error
		if cfg, err = config.Load(*path); err != nil {
			fmt.Fprintln(stderr, err)
			return nil, 2
		}
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "addr":
			cfg.Server.Listen = *addr
		case "model", "bundle":
			cfg.Model.SetLocation(*modelPath)
			cfg.Models = cfg.UpstreamEntries() // --model serves that one model (and the upstreams)
		case "queue":
			cfg.Engine.QueueLength = *queue
		}
	})
	cfg.MergeAPIKeys(getenv("HEXSERVE_API_KEYS"))
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return nil, 2
	}
	if cfg.Model.Location() == "" && len(cfg.Models) == len(cfg.UpstreamEntries()) { // no local model
		fmt.Fprintln(stderr, "config: model.path: must be set (or models, or pass --model)")
		return nil, 2
	}
	return &cfg, 0
}

func newLogger(c config.Log, w io.Writer) zerolog.Logger {
	if c.Format == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	level, err := zerolog.ParseLevel(c.Level)
	if err != nil {
		level = zerolog.InfoLevel
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}

// loadStopGrace is how long a shutdown waits for a model that is still
// loading.
const loadStopGrace = 2 * time.Second

// modelLoader loads the model; tests substitute a fake.
type modelLoader func(config.Config, zerolog.Logger) (inference.Model, *tokenizer.Tokenizer, *chat.Template, error)

// serve runs the HTTP server until ctx ends, then shuts down gracefully. The
// models load in the background (a single one, or the preloaded ones) while
// /health answers 503 "loading"; a single model that fails to load stops the
// server with that error (startModels). load nil means
// loadModel. onListen, when not nil, is called with the listening address.
func serve(ctx context.Context, cfg config.Config, log zerolog.Logger, load modelLoader, onListen func(addr string)) error {
	if load == nil {
		load = loadModel
		if es := cfg.Entries(); len(es) == 1 {
			if err := checkModelPath(es[0].Location()); err != nil {
				return err // one line, before anything else is said
			}
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := newServer(cfg, log, reg)
	if err != nil {
		return err
	}
	hs, ln, tlsOn, err := listen(cfg, log, srv)
	if err != nil {
		return err
	}
	if onListen != nil {
		onListen(ln.Addr().String())
	}

	serveErr := make(chan error, 1)
	go func() {
		if tlsOn {
			serveErr <- hs.ServeTLS(ln, "", "")
		} else {
			serveErr <- hs.Serve(ln)
		}
	}()

	models := newCatalog(cfg, load, reg, log)
	if models.single {
		log.Info().Str("model", models.entries[0].Location()).Str("addr", ln.Addr().String()).
			Msg("loading the model; /health answers 503 until it is ready")
	}
	loaded := make(chan error, 1)
	go func() { loaded <- startModels(ctx, models, srv, log) }()

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-serveErr:
	case runErr = <-loaded:
		if ctx.Err() != nil && errors.Is(runErr, context.Canceled) {
			runErr = nil // the shutdown cancelled the load: a clean stop
		}
		if runErr != nil || ctx.Err() != nil {
			break
		}
		logReady(log, ln.Addr().String(), tlsOn, cfg.Server.WebUIOn(), models.servedIDs())
		select {
		case <-ctx.Done():
		case runErr = <-serveErr:
		}
	}
	runErr = shutdown(cfg, log, hs, models, runErr)
	if runErr == nil {
		log.Info().Msg("stopped")
	}
	return runErr
}

// newServer makes the HTTP API's server from cfg: the stored responses (responses.dir), the
// upstreams and every server setting; the models are added as they load.
func newServer(cfg config.Config, log zerolog.Logger, reg *prometheus.Registry) (*server.Server, error) {
	store, err := respstore.Open(respstore.Options{MaxCount: cfg.Responses.MaxCount,
		MaxBytes: int64(cfg.Responses.MaxBytes), Dir: cfg.Responses.Dir, Validate: openai.ValidateStored, Logger: log})
	if err != nil {
		return nil, err
	}
	ups, err := upstreams(cfg, reg)
	if err != nil {
		return nil, err
	}
	return server.New(server.Options{
		Upstreams:          ups,
		Fallbacks:          fallbacks(cfg),
		Logger:             log,
		Registry:           reg,
		APIKeys:            cfg.Server.APIKeys,
		CORSOrigins:        cfg.Server.CORSOrigins,
		AllowedHosts:       cfg.Server.Hosts(),
		BodyLimit:          int64(cfg.Server.BodyLimit),
		BodyMemory:         int64(cfg.Server.BodyMemory),
		BodyTimeout:        cfg.Server.BodyTimeout,
		StreamWriteTimeout: cfg.Server.StreamWriteTimeout,
		DateString:         func() string { return cfg.Chat.DateString(time.Now()) },
		Sampling:           samplingDefaults(cfg.Sampling),
		MaxTokens:          cfg.Sampling.MaxTokens,
		WebUI:              cfg.Server.WebUIOn(),
		ResponseStore:      store,
		Version:            version,
		Structured: grammar.Limits{Steps: cfg.Structured.CompileBudget, MaxStates: cfg.Structured.MaxStates,
			MaxBranches: cfg.Structured.MaxBranches, Memory: int64(cfg.Structured.Memory)},
		StructuredCache:    int64(cfg.Structured.Memory),
		StructuredCompiles: cfg.Structured.MaxCompiles,
	}), nil
}

// loadKeyPair is tls.LoadX509KeyPair through the safe reader: regular files (a FIFO is refused,
// not waited on) of at most modelfile.MaxPEM bytes.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	cert, err := modelfile.ReadFile(certFile, modelfile.MaxPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := modelfile.ReadFile(keyFile, modelfile.MaxPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(cert, key)
}

// listen makes the HTTP server for srv (with TLS when configured), listens
// on server.listen and warns about an exposed address without API keys or
// TLS.
func listen(cfg config.Config, log zerolog.Logger, srv *server.Server) (*http.Server, net.Listener, bool, error) {
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		IdleTimeout:       cfg.Server.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          stdlog.New(log.With().Str("component", "http").Logger(), "", 0),
	}
	tlsOn := cfg.Server.TLSCertFile != ""
	if tlsOn {
		cert, err := loadKeyPair(cfg.Server.TLSCertFile, cfg.Server.TLSKeyFile)
		if err != nil {
			return nil, nil, false, fmt.Errorf("server.tls_cert_file/tls_key_file: %w", err)
		}
		// ServeTLS adds h2 and http/1.1 to NextProtos: HTTP/2 through ALPN.
		hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return nil, nil, false, listenHint(err, cfg.Server.Listen)
	}
	log.Info().Str("addr", ln.Addr().String()).Bool("tls", tlsOn).Str("version", version).Msg("hexserve started")
	if !config.IsLoopback(cfg.Server.Listen) && len(cfg.Server.APIKeys) == 0 {
		log.Warn().Str("addr", cfg.Server.Listen).
			Msg("LISTENING BEYOND LOOPBACK WITHOUT API KEYS: anyone who can reach this address can use the model; set server.api_keys or HEXSERVE_API_KEYS")
	}
	if !config.IsLoopback(cfg.Server.Listen) && !tlsOn {
		log.Warn().Str("addr", cfg.Server.Listen).
			Msg("LISTENING BEYOND LOOPBACK WITHOUT TLS: API keys and prompts travel unencrypted; set server.tls_cert_file and server.tls_key_file")
	}
	return hs, ln, tlsOn, nil
}

// startModels hands the models to srv and loads the preloaded ones. A
// single model is served once it has loaded, and its failure is returned
// (the server stops, as before several models existed); several are served
// at once, loaded on demand, and a preload that fails leaves the others
// serving.
func startModels(ctx context.Context, models *catalog, srv *server.Server, log zerolog.Logger) error {
	if !models.single {
		srv.SetCatalog(models) // /health waits for the preloaded ones
	}
	err := models.preload(ctx)
	switch {
	case models.single && err == nil:
		srv.SetCatalog(models)
	case err != nil && !models.single:
		log.Error().Err(err).Msg("a preloaded model failed to load; the others keep serving")
		err = nil
	}
	return err
}

// shutdown stops hs gracefully, unloads the models (waiting a little for one
// still loading) and returns runErr (nil for a server that was closed).
func shutdown(cfg config.Config, log zerolog.Logger, hs *http.Server, models *catalog, runErr error) error {
	log.Info().Msg("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn().Err(err).Dur("timeout", cfg.Server.ShutdownTimeout).Msg("in-flight requests did not finish in time; closing")
		hs.Close()
	}
	closed := make(chan struct{})
	stillLoading := models.loading()
	go func() {
		models.reg.Close() // each model's Close logs what failed
		close(closed)
	}()
	if stillLoading {
		// A load that does not end (a huge or endless file, a stuck
		// driver) must not hold up a SIGTERM: the process exits and the
		// kernel reclaims what the loader holds.
		select {
		case <-closed:
		case <-time.After(loadStopGrace):
			log.Warn().Dur("waited", loadStopGrace).Msg("a model is still loading; exiting without waiting for it")
		}
	} else {
		<-closed
	}
	if errors.Is(runErr, http.ErrServerClosed) {
		runErr = nil
	}
	return runErr
}

// openKVStore opens the KV store configured by c for model: nil when it is
// off (engine.kv_cache.memory 0) or the model cannot save its KV rows.
func openKVStore(c config.KVCache, model inference.Model, log zerolog.Logger) (*kvstore.Store, error) {
	snap, ok := model.(inference.SeqKVSnapshotter)
	if c.Memory == 0 || !ok {
		return nil, nil
	}
	st, err := kvstore.Open(kvstore.Config{Layout: snap.KVLayout(), Memory: int64(c.Memory), Dir: c.Dir, Disk: int64(c.Disk),
		Logger: log.With().Str("component", "kvstore").Logger()})
	if err != nil {
		return nil, fmt.Errorf("engine.kv_cache: %w", err)
	}
	ev := log.Info().Str("memory", humanSize(int64(c.Memory)))
	if c.Dir != "" { // the disk budget only matters with a disk store
		ev = ev.Str("dir", c.Dir).Str("disk", humanSize(int64(c.Disk)))
	}
	ev.Msg("KV store on")
	return st, nil
}

// upstreams are the clients of the models: entries that are upstreams, each
// with its key from the environment or a file (never logged).
func upstreams(cfg config.Config, reg prometheus.Registerer) ([]server.Upstream, error) {
	entries := cfg.UpstreamEntries()
	if len(entries) == 0 {
		return nil, nil
	}
	metrics := upstream.NewMetrics(reg)
	budget := upstream.NewBudget(int64(cfg.Server.RelayMemory)) // shared by every upstream
	var out []server.Upstream
	for _, e := range entries {
		u := e.Upstream
		key, err := upstream.KeyFrom(u.APIKeyEnv, u.APIKeyFile)
		if err != nil {
			return nil, fmt.Errorf("model %s: upstream key: %w", e.ID, err)
		}
		opts := upstream.Options{ID: e.ID, BaseURL: u.BaseURL, APIKey: key, Model: u.Model,
			Timeout: u.Timeout, ConnectTimeout: u.ConnectTimeout, MaxInFlight: u.MaxInFlight,
			StreamWriteTimeout: cfg.Server.StreamWriteTimeout, Metrics: metrics, Budget: budget}
		if opts.Timeout == 0 {
			opts.Timeout = cfg.Engine.Timeout
		}
		if u.CAFile != "" {
			if opts.RootCAs, err = upstream.LoadCAs(u.CAFile); err != nil {
				return nil, fmt.Errorf("model %s: upstream.ca_file: %w", e.ID, err)
			}
		}
		c, err := upstream.New(opts)
		if err != nil {
			return nil, err
		}
		out = append(out, server.Upstream{ID: e.ID, Aliases: e.Aliases, Relay: c})
	}
	return out, nil
}

// fallbacks are the local models' fallback policies.
func fallbacks(cfg config.Config) []server.Fallback {
	var out []server.Fallback
	for _, e := range cfg.Entries() {
		if f := e.Fallback; f != nil {
			out = append(out, server.Fallback{Model: e.ID, Aliases: e.Aliases, To: f.To, When: f.When})
		}
	}
	return out
}
