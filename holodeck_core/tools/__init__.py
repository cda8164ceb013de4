"""Tool runtimes: the live backends of an agent's tools (MCP sessions, prompt tools, retrieval
indexes). A suite opens each once, shares it among concurrent cases and closes it at the end
(docs/agent-yaml.md). ``function`` tools and ``mock:`` results are served by
:class:`holodeck_core.tools.toolbox.ToolBox` directly."""
