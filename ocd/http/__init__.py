"""ocd's HTTP listener: worker routes, and ocd's own endpoints under reserved prefixes."""
