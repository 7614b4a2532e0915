"""The task file: strict frontmatter reading, the verified splice, criteria text, discovery, resolution."""
