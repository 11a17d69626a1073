"""Serving: model engines (`engines`), the HTTP API (`http`) and the command line (`cli`)."""
