"""The web page served at `/`: plain HTML, CSS and JavaScript, shipped as package data (this
file makes the folder a package, so the wheel's package-data globs include its files)."""
