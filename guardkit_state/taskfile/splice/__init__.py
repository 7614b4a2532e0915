"""The surgical splice of the state block into a task file's frontmatter, verified before it lands."""
