"""Reusable Textual widgets for Swarmkit. They take plain dataclasses and never import store or runtime."""
