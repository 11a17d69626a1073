"""Code intelligence for the search tools: tree-sitter outlines and a workspace symbol index
kept fresh by a file watcher, and chunked semantic search with a lexical fallback."""
