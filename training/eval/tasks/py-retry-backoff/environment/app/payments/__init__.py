"""Talking to the payment gateway."""
