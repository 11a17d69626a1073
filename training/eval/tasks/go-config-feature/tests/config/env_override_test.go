package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"example.com/shipd/config"
)

func configFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shipd.json")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const fileText = `{"port": 9000, "workers": 6, "tags": ["from-file"], "db": {"url": "postgres://db.internal/ship"}}`

func TestEverySettingCanComeFromTheEnvironment(t *testing.T) {
	vars := map[string]string{
		"SHIPD_LISTEN":         "0.0.0.0",
		"SHIPD_PORT":           "9443",
		"SHIPD_WORKERS":        "12",
		"SHIPD_DEBUG":          "true",
		"SHIPD_TIMEOUT":        "1m30s",
		"SHIPD_TAGS":           "eu,blue",
		"SHIPD_DB_URL":         "postgres://ship@db/prod",
		"SHIPD_DB_MAX_CONNS":   "40",
		"SHIPD_DB_TIMEOUT":     "250ms",
		"SHIPD_DEPLOY_ROOT":    "/data/releases",
		"SHIPD_DEPLOY_KEEP":    "9",
		"SHIPD_DEPLOY_DRY_RUN": "1",
	}
	for name, value := range vars {
		t.Setenv(name, value)
	}
	cfg, err := config.Load(configFile(t, fileText))
	if err != nil {
		t.Fatal(err)
	}
	want := config.Config{
		Listen:  "0.0.0.0",
		Port:    9443,
		Workers: 12,
		Debug:   true,
		Timeout: config.Duration{Duration: 90 * time.Second},
		Tags:    []string{"eu", "blue"},
		DB:      config.DB{URL: "postgres://ship@db/prod", MaxConns: 40, Timeout: config.Duration{Duration: 250 * time.Millisecond}},
		Deploy:  config.Deploy{Root: "/data/releases", Keep: 9, DryRun: true},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("got  %+v\nwant %+v", cfg, want)
	}
}

func TestEnvironmentGoesOverTheFileAndTheDefaults(t *testing.T) {
	t.Setenv("SHIPD_PORT", "9100")
	t.Setenv("SHIPD_DB_MAX_CONNS", "3")
	cfg, err := config.Load(configFile(t, fileText))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 9100 || cfg.DB.MaxConns != 3 {
		t.Fatalf("environment not applied: port %d, db.max_conns %d", cfg.Port, cfg.DB.MaxConns)
	}
	if cfg.Workers != 6 || cfg.DB.URL != "postgres://db.internal/ship" || !reflect.DeepEqual(cfg.Tags, []string{"from-file"}) {
		t.Fatalf("the file's settings were lost: %+v", cfg)
	}
	if cfg.Listen != "127.0.0.1" || cfg.Deploy.Keep != 5 || cfg.DB.Timeout.Duration != 5*time.Second {
		t.Fatalf("the defaults were lost: %+v", cfg)
	}
}

func TestEnvironmentWithoutAFile(t *testing.T) {
	t.Setenv("SHIPD_WORKERS", "2")
	t.Setenv("SHIPD_DEPLOY_DRY_RUN", "true")
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Workers != 2 || !cfg.Deploy.DryRun || cfg.Port != 8080 {
		t.Fatalf("%+v", cfg)
	}
}

func TestListsAreCommaSeparatedAndReplaceTheFile(t *testing.T) {
	t.Setenv("SHIPD_TAGS", " eu, blue ,,canary ")
	cfg, err := config.Load(configFile(t, fileText))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Tags, []string{"eu", "blue", "canary"}) {
		t.Fatalf("tags = %q", cfg.Tags)
	}
	t.Setenv("SHIPD_TAGS", "solo")
	cfg, err = config.Load(configFile(t, fileText))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Tags, []string{"solo"}) {
		t.Fatalf("tags = %q", cfg.Tags)
	}
}

func TestAnEmptyVariableCountsAsUnset(t *testing.T) {
	for _, name := range []string{"SHIPD_PORT", "SHIPD_TAGS", "SHIPD_DEBUG", "SHIPD_DB_URL", "SHIPD_TIMEOUT"} {
		t.Setenv(name, "")
	}
	cfg, err := config.Load(configFile(t, fileText))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 9000 || !reflect.DeepEqual(cfg.Tags, []string{"from-file"}) || cfg.DB.URL != "postgres://db.internal/ship" || cfg.Timeout.Duration != 30*time.Second {
		t.Fatalf("%+v", cfg)
	}
}

func TestBooleansAsParseBoolTakesThem(t *testing.T) {
	for value, want := range map[string]bool{"1": true, "t": true, "TRUE": true, "True": true, "0": false, "f": false, "false": false, "FALSE": false} {
		t.Setenv("SHIPD_DEBUG", value)
		t.Setenv("SHIPD_DEPLOY_DRY_RUN", value)
		cfg, err := config.Load("")
		if err != nil {
			t.Fatalf("%s: %v", value, err)
		}
		if cfg.Debug != want || cfg.Deploy.DryRun != want {
			t.Fatalf("SHIPD_DEBUG=%s gave debug=%v dry_run=%v", value, cfg.Debug, cfg.Deploy.DryRun)
		}
	}
}

func TestABadValueIsAnErrorNamingTheVariable(t *testing.T) {
	cases := map[string]string{
		"SHIPD_PORT":           "eighty",
		"SHIPD_WORKERS":        "4.5",
		"SHIPD_DEBUG":          "maybe",
		"SHIPD_TIMEOUT":        "30",
		"SHIPD_DB_MAX_CONNS":   "lots",
		"SHIPD_DB_TIMEOUT":     "soon",
		"SHIPD_DEPLOY_KEEP":    "-x",
		"SHIPD_DEPLOY_DRY_RUN": "yes please",
	}
	for name, value := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, value)
			_, err := config.Load(configFile(t, fileText))
			if err == nil {
				t.Fatalf("%s=%q was accepted", name, value)
			}
			if !strings.Contains(err.Error(), name) {
				t.Fatalf("the error does not name %s: %v", name, err)
			}
		})
	}
}

func TestTheResultIsStillValidated(t *testing.T) {
	for name, value := range map[string]string{"SHIPD_WORKERS": "0", "SHIPD_PORT": "70000", "SHIPD_DB_URL": "nowhere", "SHIPD_DEPLOY_KEEP": "0"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, value)
			if _, err := config.Load(""); err == nil {
				t.Fatalf("%s=%s gave a valid config", name, value)
			}
		})
	}
}

func TestAnotherPrefix(t *testing.T) {
	t.Setenv("SHIPD_PORT", "7100")
	t.Setenv("ACME_PORT", "7300")
	t.Setenv("ACME_DB_MAX_CONNS", "7")
	cfg, err := config.LoadWithPrefix(configFile(t, fileText), "ACME")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 7300 || cfg.DB.MaxConns != 7 || cfg.Workers != 6 {
		t.Fatalf("prefix ACME: %+v", cfg)
	}
	cfg, err = config.LoadWithPrefix(configFile(t, fileText), "SHIPD")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 7100 || cfg.DB.MaxConns != 10 {
		t.Fatalf("prefix SHIPD: %+v", cfg)
	}
}

func TestAnEmptyPrefixTurnsTheOverridesOff(t *testing.T) {
	t.Setenv("SHIPD_PORT", "7100")
	t.Setenv("PORT", "7200")
	t.Setenv("_PORT", "7300")
	cfg, err := config.LoadWithPrefix(configFile(t, fileText), "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 9000 {
		t.Fatalf("port %d with no prefix, want the file's 9000", cfg.Port)
	}
}

func TestSimilarNamesAreNotPickedUp(t *testing.T) {
	t.Setenv("SHIPDX_PORT", "7100")
	t.Setenv("XSHIPD_PORT", "7200")
	t.Setenv("SHIPD_DB", "postgres://nope/")
	t.Setenv("shipd_port", "7300")
	cfg, err := config.Load(configFile(t, fileText))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 9000 || cfg.DB.URL != "postgres://db.internal/ship" {
		t.Fatalf("%+v", cfg)
	}
}
