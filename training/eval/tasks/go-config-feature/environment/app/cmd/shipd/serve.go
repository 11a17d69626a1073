package main

import (
	"encoding/json"
	"fmt"
	"net/http"

	"example.com/shipd/config"
)

func serve(cfg config.Config) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/config", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		safe := cfg
		safe.DB.URL = "(hidden)"
		_ = json.NewEncoder(w).Encode(safe)
	})
	server := &http.Server{
		Addr:         fmt.Sprintf("%s:%d", cfg.Listen, cfg.Port),
		Handler:      mux,
		ReadTimeout:  cfg.Timeout.Duration,
		WriteTimeout: cfg.Timeout.Duration,
	}
	return server.ListenAndServe()
}
