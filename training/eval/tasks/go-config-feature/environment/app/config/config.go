// Package config is shipd's configuration: built-in defaults, then a JSON file.
package config

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Config is every setting of shipd. The JSON keys are the names used in the config file.
type Config struct {
	Listen  string   `json:"listen"`
	Port    int      `json:"port"`
	Workers int      `json:"workers"`
	Debug   bool     `json:"debug"`
	Timeout Duration `json:"timeout"`
	Tags    []string `json:"tags"`
	DB      DB       `json:"db"`
	Deploy  Deploy   `json:"deploy"`
}

// DB is the release database.
type DB struct {
	URL      string   `json:"url"`
	MaxConns int      `json:"max_conns"`
	Timeout  Duration `json:"timeout"`
}

// Deploy is where and how releases are rolled out.
type Deploy struct {
	Root   string `json:"root"`
	Keep   int    `json:"keep"`
	DryRun bool   `json:"dry_run"`
}

// Default is the configuration without a file.
func Default() Config {
	return Config{
		Listen:  "127.0.0.1",
		Port:    8080,
		Workers: 4,
		Timeout: Duration{30 * time.Second},
		Tags:    []string{},
		DB:      DB{URL: "sqlite:///var/lib/shipd/shipd.db", MaxConns: 10, Timeout: Duration{5 * time.Second}},
		Deploy:  Deploy{Root: "/srv/releases", Keep: 5},
	}
}

// Load is the defaults with the file at path (if path is not empty) on top, validated.
func Load(path string) (Config, error) {
	cfg := Default()
	if path != "" {
		if err := readFile(path, &cfg); err != nil {
			return Config{}, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate reports every invalid setting at once.
func (c Config) Validate() error {
	var problems []string
	if strings.TrimSpace(c.Listen) == "" {
		problems = append(problems, "listen is empty")
	}
	if c.Port < 1 || c.Port > 65535 {
		problems = append(problems, fmt.Sprintf("port %d is not between 1 and 65535", c.Port))
	}
	if c.Workers < 1 {
		problems = append(problems, fmt.Sprintf("workers must be at least 1, not %d", c.Workers))
	}
	if c.Timeout.Duration <= 0 {
		problems = append(problems, "timeout must be positive")
	}
	if !strings.Contains(c.DB.URL, "://") {
		problems = append(problems, fmt.Sprintf("db.url %q is not a URL", c.DB.URL))
	}
	if c.DB.MaxConns < 1 {
		problems = append(problems, fmt.Sprintf("db.max_conns must be at least 1, not %d", c.DB.MaxConns))
	}
	if c.DB.Timeout.Duration <= 0 {
		problems = append(problems, "db.timeout must be positive")
	}
	if c.Deploy.Root == "" {
		problems = append(problems, "deploy.root is empty")
	}
	if c.Deploy.Keep < 1 {
		problems = append(problems, fmt.Sprintf("deploy.keep must be at least 1, not %d", c.Deploy.Keep))
	}
	if len(problems) > 0 {
		return errors.New("invalid config: " + strings.Join(problems, "; "))
	}
	return nil
}
