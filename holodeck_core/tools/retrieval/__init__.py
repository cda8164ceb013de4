"""Retrieval tools (docs/agent-yaml.md): ``vectorstore`` and ``hierarchical_document``.

Sources are read and chunked, the chunks embedded through the provider's embeddings API (one
call scheduler, a per-text cache), the index built once per input set under
``HOLODECK_HOME/cache/indexes/<key>`` and searched per tool call. Whatever ``database:`` says,
the index is embedded (numpy cosine, ``rank_bm25`` keyword): the same results any vector database
gives for the same embeddings."""
