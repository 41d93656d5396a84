"""The GPU device check (issue 8): one script, its sections and its plan; see README.md."""
