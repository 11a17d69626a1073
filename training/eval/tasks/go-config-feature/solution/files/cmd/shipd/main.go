// shipd serves release metadata and rolls releases out.
//
//	shipd [-config FILE] [-env-prefix PREFIX] [-listen ADDR] [-port N] [-workers N] [-debug]
//	      [-print-config]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"example.com/shipd/config"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("shipd", flag.ContinueOnError)
	flags.SetOutput(stderr)
	configPath := flags.String("config", "", "the JSON config file")
	envPrefix := flags.String("env-prefix", config.DefaultEnvPrefix,
		"the prefix of the environment variables that override the config file (empty: none)")
	listen := flags.String("listen", "", "the address to listen on (overrides the config)")
	port := flags.Int("port", 0, "the port to listen on (overrides the config)")
	workers := flags.Int("workers", 0, "the number of deploy workers (overrides the config)")
	debug := flags.Bool("debug", false, "log every request (overrides the config)")
	printConfig := flags.Bool("print-config", false, "print the effective config as JSON and exit")
	if err := flags.Parse(args); err != nil {
		return 2
	}

	cfg, err := config.LoadWithPrefix(*configPath, *envPrefix)
	if err != nil {
		fmt.Fprintln(stderr, "shipd:", err)
		return 1
	}
	// Only the flags given on the command line override the config (and the environment).
	flags.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "listen":
			cfg.Listen = *listen
		case "port":
			cfg.Port = *port
		case "workers":
			cfg.Workers = *workers
		case "debug":
			cfg.Debug = *debug
		}
	})
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, "shipd:", err)
		return 1
	}

	if *printConfig {
		out, _ := json.MarshalIndent(cfg, "", "  ")
		fmt.Fprintln(stdout, string(out))
		return 0
	}
	fmt.Fprintf(stderr, "shipd: listening on %s:%d (%d workers, tags %s)\n",
		cfg.Listen, cfg.Port, cfg.Workers, strings.Join(cfg.Tags, ","))
	if err := serve(cfg); err != nil {
		fmt.Fprintln(stderr, "shipd:", err)
		return 1
	}
	return 0
}
