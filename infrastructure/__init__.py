"""Infrastructure layer: storage adapters, the CLI and the demo."""
