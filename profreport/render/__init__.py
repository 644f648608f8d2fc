"""Renderers: each turns a run record into content (str or bytes); the caller writes files."""
