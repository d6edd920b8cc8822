"""Test helpers that later stages' tests use too (a local OpenAI-compatible server)."""
