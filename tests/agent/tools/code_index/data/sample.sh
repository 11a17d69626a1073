#!/usr/bin/env bash
set -euo pipefail

log() {
    echo "$@" >&2
}

function build {
    log "building"
}

function clean() {
    rm -rf build
}

build
