package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"example.com/shipd/config"
)

var binary string

// TestMain builds shipd once; every test runs it as a user would, in an environment of its own.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shipd-verify-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "shipd")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "go build:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func shipd(t *testing.T, env []string, args ...string) (config.Config, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var cfg config.Config
	if code == 0 {
		if err := json.Unmarshal(stdout.Bytes(), &cfg); err != nil {
			t.Fatalf("-print-config printed no config: %v\n%s", err, stdout.String())
		}
	}
	return cfg, stderr.String(), code
}

func fileWith(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shipd.json")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFlagsOverEnvironmentOverFileOverDefaults(t *testing.T) {
	file := fileWith(t, `{"port": 7000, "workers": 2, "debug": true, "listen": "10.1.1.1"}`)
	env := []string{"SHIPD_PORT=7100", "SHIPD_WORKERS=3"}
	cfg, stderr, code := shipd(t, env, "-config", file, "-port", "7200", "-print-config")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if cfg.Port != 7200 || cfg.Workers != 3 || !cfg.Debug || cfg.Listen != "10.1.1.1" || cfg.DB.MaxConns != 10 {
		t.Fatalf("%+v", cfg)
	}
	cfg, stderr, code = shipd(t, env, "-print-config", "-config", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if cfg.Port != 7100 || cfg.Workers != 3 {
		t.Fatalf("without -port: %+v", cfg)
	}
}

func TestAFlagSetToFalseBeatsTheEnvironment(t *testing.T) {
	env := []string{"SHIPD_DEBUG=true"}
	cfg, stderr, code := shipd(t, env, "-debug=false", "-print-config")
	if code != 0 || cfg.Debug {
		t.Fatalf("exit %d, debug %v: %s", code, cfg.Debug, stderr)
	}
	cfg, stderr, code = shipd(t, env, "-print-config")
	if code != 0 || !cfg.Debug {
		t.Fatalf("exit %d, debug %v without the flag: %s", code, cfg.Debug, stderr)
	}
}

func TestNestedSettingsFromTheEnvironment(t *testing.T) {
	env := []string{"SHIPD_DEPLOY_DRY_RUN=true", "SHIPD_DEPLOY_ROOT=/tmp/rel", "SHIPD_DB_TIMEOUT=2s", "SHIPD_TAGS=a, b"}
	cfg, stderr, code := shipd(t, env, "-print-config")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !cfg.Deploy.DryRun || cfg.Deploy.Root != "/tmp/rel" || cfg.DB.Timeout.String() != "2s" || strings.Join(cfg.Tags, "|") != "a|b" {
		t.Fatalf("%+v", cfg)
	}
}

func TestEnvPrefixFlag(t *testing.T) {
	env := []string{"SHIPD_LISTEN=10.0.0.1", "ACME_LISTEN=0.0.0.0", "ACME_WORKERS=8"}
	cfg, stderr, code := shipd(t, env, "-env-prefix", "ACME", "-print-config")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if cfg.Listen != "0.0.0.0" || cfg.Workers != 8 {
		t.Fatalf("-env-prefix ACME: %+v", cfg)
	}
	cfg, stderr, code = shipd(t, env, "-env-prefix=", "-print-config")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if cfg.Listen != "127.0.0.1" || cfg.Workers != 4 {
		t.Fatalf("-env-prefix '': %+v", cfg)
	}
	cfg, _, code = shipd(t, env, "-print-config")
	if code != 0 || cfg.Listen != "10.0.0.1" {
		t.Fatalf("default prefix: exit %d, %+v", code, cfg)
	}
}

func TestABadVariableStopsShipd(t *testing.T) {
	_, stderr, code := shipd(t, []string{"SHIPD_DB_MAX_CONNS=many"}, "-print-config")
	if code == 0 {
		t.Fatal("shipd accepted SHIPD_DB_MAX_CONNS=many")
	}
	if !strings.Contains(stderr, "SHIPD_DB_MAX_CONNS") {
		t.Fatalf("the error does not name the variable: %s", stderr)
	}
	_, _, code = shipd(t, []string{"SHIPD_WORKERS=0"}, "-print-config")
	if code == 0 {
		t.Fatal("shipd accepted SHIPD_WORKERS=0")
	}
}
