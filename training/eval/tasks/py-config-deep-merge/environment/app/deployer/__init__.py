"""Deploys our services; reads layered configuration."""
