package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shipd.json")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefaultsAreValid(t *testing.T) {
	cfg, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 8080 || cfg.DB.MaxConns != 10 || cfg.Timeout.Duration != 30*time.Second {
		t.Fatalf("unexpected defaults: %+v", cfg)
	}
}

func TestFileOverridesDefaults(t *testing.T) {
	cfg, err := Load(write(t, `{"port": 9000, "tags": ["eu", "blue"], "db": {"timeout": "2s"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 9000 || len(cfg.Tags) != 2 || cfg.DB.Timeout.Duration != 2*time.Second {
		t.Fatalf("file not applied: %+v", cfg)
	}
	if cfg.DB.MaxConns != 10 || cfg.Workers != 4 {
		t.Fatalf("defaults lost: %+v", cfg)
	}
}

func TestUnknownKeysAndInvalidValues(t *testing.T) {
	if _, err := Load(write(t, `{"prot": 9000}`)); err == nil {
		t.Fatal("an unknown key was accepted")
	}
	_, err := Load(write(t, `{"port": 0, "deploy": {"keep": 0}}`))
	if err == nil || !strings.Contains(err.Error(), "port") || !strings.Contains(err.Error(), "deploy.keep") {
		t.Fatalf("err = %v", err)
	}
}
