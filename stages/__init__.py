"""The pipeline stages (ingest, train, export), orchestrator and CLI."""
