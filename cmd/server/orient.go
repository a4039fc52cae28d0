package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/config"
)

// hostsimDir is where `make` builds hostsim's libraries for this machine:
// build/hostsim/GOARCH under the working folder, else under the checkout
// bin/hexserve was built in; "" when neither has them.
func hostsimDir() string {
	dir := filepath.Join("build", "hostsim", runtime.GOARCH)
	if fileExists(filepath.Join(dir, "libQnnHtp.so")) {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return dir
		}
		return abs
	}
	if exe, err := os.Executable(); err == nil {
		if alt := filepath.Join(filepath.Dir(filepath.Dir(exe)), dir); fileExists(filepath.Join(alt, "libQnnHtp.so")) {
			return alt
		}
	}
	return ""
}

// useHostsim points the libraries of a config that left them at their
// defaults (bare names the dynamic loader cannot find on a Linux host) at
// hostsim's, when they are built: `serve --model X` then runs as `inspect`
// does, without configs/dev.yaml. It returns the folder used, or "".
func useHostsim(cfg *config.Config) string {
	if runtime.GOOS != "linux" || cfg.Model.Libraries != config.Default().Model.Libraries {
		return ""
	}
	dir := hostsimDir()
	if dir == "" {
		return ""
	}
	cfg.Model.Libraries = librariesIn(dir)
	for i := range cfg.Models {
		if cfg.Models[i].Libraries == config.Default().Model.Libraries {
			cfg.Models[i].Libraries = cfg.Model.Libraries
		}
	}
	return dir
}

// librariesIn is the QNN libraries of folder dir, by their usual names.
func librariesIn(dir string) config.Libraries {
	return config.Libraries{Backend: filepath.Join(dir, "libQnnHtp.so"), System: filepath.Join(dir, "libQnnSystem.so"),
		RPCMem: filepath.Join(dir, "libcdsprpc.so")}
}

// libraryHint adds what to do to a failure to open the QNN libraries of a
// config that left them at their defaults.
func libraryHint(err error, cfg config.Config) error {
	if err == nil || !strings.Contains(err.Error(), "load backend library") || cfg.Model.Libraries != config.Default().Model.Libraries {
		return err
	}
	return fmt.Errorf("%w\n  on a phone, set model.libraries; on a Linux host, build hostsim with `make` and run from the checkout "+
		"(serve finds build/hostsim/ then), or start from configs/dev.yaml: hexserve serve --config configs/dev.yaml", err)
}

// listenHint adds what to do to a listen error: another server on the port.
func listenHint(err error, addr string) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w: another server is using %s; pick another address with --addr HOST:PORT (or server.listen), e.g. --addr 127.0.0.1:8081", err, addr)
	}
	return err
}

// baseURL is the URL people open for addr: a wildcard host becomes
// 127.0.0.1 (or [::1]).
func baseURL(addr string, tls bool) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/"
}

// logReady says where to go once the models are served: the chat page's
// URL (when on), the API's, and the model ids to put in requests.
func logReady(log zerolog.Logger, addr string, tls, webUI bool, ids []string) {
	url := baseURL(addr, tls)
	ev := log.Info()
	if webUI {
		ev = ev.Str("chat_page", url)
	}
	ev.Str("api", url+"v1").Strs("models", ids).Msg("ready")
}

// logLoaded is a model's "model ready" line: how long it took, its
// memory, split into the model's files, the runtime's buffers (KV cache and
// graph I/O) and the KV store's budget, and the sequences it runs side by
// side (engine.max_sequences resolved); then, for a model whose files say
// their weights are generated, that its text is gibberish by design.
func logLoaded(log zerolog.Logger, took time.Duration, files, buffers, store int64, seqs int, generated string) {
	ev := log.Info().Str("load", took.Round(time.Millisecond).String()).Str("files", humanSize(files)).
		Str("kv_cache_and_io", humanSize(buffers)).Int("max_sequences", seqs)
	if store > 0 {
		ev = ev.Str("kv_store_budget", humanSize(store))
	}
	ev.Msg("model ready")
	if generated != "" {
		log.Info().Str("weights", generated).Msg("generated random weights: the text is gibberish by design")
	}
}
