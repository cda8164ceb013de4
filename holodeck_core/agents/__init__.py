"""The tool loop and the model backends (OpenAI-compatible and Anthropic)."""
