"""Configuration: agent.yaml loading, env substitution, prompt versions, the project."""
