"""Reference broker and client (issue 3 builds them; nothing here yet)."""
