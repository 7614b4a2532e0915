"""Text-preserving YAML: the strict reader, the one editor of YAML text and its check, the file writer."""
