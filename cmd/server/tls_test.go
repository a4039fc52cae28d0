package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/internal/syncbuf"
	"github.com/hexserve/hexserve/internal/testwait"
	"github.com/hexserve/hexserve/tokenizer"
)

// selfSigned writes a certificate for 127.0.0.1 and its key as PEM files
// and returns their paths and the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "hexserve test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert
}

// startServe runs serve with a model that loads at once and returns the
// listening address; cancel stops it.
func startServe(t *testing.T, cfg config.Config, logs io.Writer) (addr string, stop func() error) {
	t.Helper()
	tok := loadTokenizer(t)
	model := inferencetest.NewScripted(inference.ModelInfo{Name: "tiny", BOS: 128000}, []int32{9906})
	load := func(config.Config, zerolog.Logger) (inference.Model, *tokenizer.Tokenizer, *chat.Template, error) {
		return model, tok, nil, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, zerolog.New(logs), load, func(a string) { addrc <- a }) }()
	select {
	case addr = <-addrc:
	case err := <-done:
		cancel()
		t.Fatalf("serve: %v", err)
	}
	return addr, func() error {
		cancel()
		return testwait.Recv(t, done, 10*time.Second, "serve returning")
	}
}

// TestServeTLS: with server.tls_cert_file and tls_key_file the server speaks
// HTTPS, HTTP/2 through ALPN and HTTP/1.1 alike, with the configured
// certificate, and does not warn about clear text; plain HTTP is refused.
func TestServeTLS(t *testing.T) {
	certFile, keyFile, cert := selfSigned(t)
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Server.TLSCertFile, cfg.Server.TLSKeyFile = certFile, keyFile
	cfg.Model.Bundle = "fake"
	var logs syncbuf.Buffer
	addr, stop := startServe(t, cfg, &logs)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	for _, tt := range []struct {
		name  string
		http2 bool
		proto string
	}{{"HTTP/2", true, "HTTP/2.0"}, {"HTTP/1.1", false, "HTTP/1.1"}} {
		t.Run(tt.name, func(t *testing.T) {
			tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: tt.http2}
			if !tt.http2 {
				tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // HTTP/1.1 only
			}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
			var resp *http.Response
			var err error
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				resp, err = client.Get("https://" + addr + "/health")
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode == 200 || time.Now().After(deadline) {
					break
				}
				resp.Body.Close()
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Proto != tt.proto || resp.TLS == nil {
				t.Fatalf("status %d proto %s tls %v: %s", resp.StatusCode, resp.Proto, resp.TLS != nil, body)
			}
			if got := resp.TLS.PeerCertificates[0]; !got.Equal(cert) {
				t.Fatal("served another certificate")
			}
		})
	}
	if resp, err := http.Get("http://" + addr + "/health"); err == nil {
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP on the TLS port: %d", resp.StatusCode)
		}
		resp.Body.Close()
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "WITHOUT TLS") {
		t.Errorf("warned about clear text with TLS on: %s", logs.String())
	}
}

// TestServeTLSBadFiles: unreadable or mismatched PEM files stop serve at
// start with an error naming the keys.
func TestServeTLSBadFiles(t *testing.T) {
	certFile, _, _ := selfSigned(t)
	_, otherKey, _ := selfSigned(t)
	fifo := filepath.Join(t.TempDir(), "fifo.pem") // refused by the safe reader, never waited on
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, files := range map[string][2]string{
		"missing":    {filepath.Join(t.TempDir(), "none.pem"), otherKey},
		"mismatched": {certFile, otherKey},
		"not PEM":    {certFile, certFile},
		"key a FIFO": {certFile, fifo},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Server.Listen = "127.0.0.1:0"
			cfg.Server.TLSCertFile, cfg.Server.TLSKeyFile = files[0], files[1]
			cfg.Model.Bundle = fakeBundle(t)
			err := serve(context.Background(), cfg, zerolog.Nop(), nil, nil)
			if err == nil || !strings.Contains(err.Error(), "server.tls_cert_file/tls_key_file") {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// TestServeClearTextWarning: listening beyond loopback without TLS warns
// that keys and prompts travel unencrypted; loopback does not.
func TestServeClearTextWarning(t *testing.T) {
	for listen, want := range map[string]bool{"0.0.0.0:0": true, "127.0.0.1:0": false} {
		cfg := config.Default()
		cfg.Server.Listen = listen
		cfg.Server.APIKeys = []string{"k"}
		cfg.Model.Bundle = "fake"
		var logs syncbuf.Buffer
		_, stop := startServe(t, cfg, &logs)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(logs.String(), "WITHOUT TLS: API keys and prompts travel unencrypted"); got != want {
			t.Errorf("%s: warned %v, want %v: %s", listen, got, want, logs.String())
		}
	}
}

// TestServeStopWhileLoading: a shutdown (SIGTERM) during a load that never
// ends returns promptly instead of waiting for it.
func TestServeStopWhileLoading(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	load := func(config.Config, zerolog.Logger) (inference.Model, *tokenizer.Tokenizer, *chat.Template, error) {
		<-block // an endless read
		return nil, nil, nil, io.ErrUnexpectedEOF
	}
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Model.Bundle = "/dev/zero"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	listening := make(chan struct{})
	go func() { done <- serve(ctx, cfg, zerolog.Nop(), load, func(string) { close(listening) }) }()
	<-listening
	start := time.Now()
	cancel()
	if err := testwait.Recv(t, done, loadStopGrace+5*time.Second, "serve returning while the load still runs"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > loadStopGrace+time.Second {
		t.Fatalf("stopped after %v", d)
	}
}
